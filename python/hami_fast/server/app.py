"""The extender's HTTP app: HAMi's routes on the shared router (`server/router.py`).

Filter and Bind answer in kube-scheduler's protocol (200 with an `Error` field), the webhook in an
AdmissionReview; 404, 405 and 413 are the router's, as in the descheduler API.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import orjson

from hami_fast.server.router import Answer, Reply, Route, Router
from hami_fast.server.scheduler import Scheduler, bind_result, filter_error

TEXT = "text/plain"


def review_error(message: str) -> bytes:
    status = {"code": 400, "message": message}
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": "", "allowed": False, "status": status},
        }
    )


class App(Router):
    def __init__(self, scheduler: Scheduler, executor: ThreadPoolExecutor) -> None:
        self.scheduler = scheduler
        # The webhook never blocks, so it skips the thread hop; Filter answers on the loop too unless
        # it may wait (see `filter`); Bind waits in its node's queue without holding a thread.
        in_memory = not getattr(scheduler.writer, "blocking", True)
        filter_route = (
            Route("POST", "/filter", scheduler.filter_answer, "inline", filter_error)
            if in_memory
            else Route("POST", "/filter", self.filter, "async", filter_error)
        )
        super().__init__(
            [
                filter_route,
                Route("POST", "/bind", self.bind, "async", bind_result),
                Route("POST", "/webhook", scheduler.admit, "inline", review_error),
                Route("GET", "/healthz", lambda _: (200, b"ok", TEXT), "inline"),
                Route("GET", "/readyz", self.readyz, "inline"),
            ],
            executor,
            name="extender",
        )

    async def filter(self, body: bytes) -> Answer:
        """On the loop once the caches are synced and Filter writes nothing before answering (the
        default `--allocation-write bind`, or `behind-answer`); in the pool while it may wait for the
        sync (as HAMi's Filter does) or for its annotation patch (`--allocation-write filter`)."""
        scheduler = self.scheduler
        if scheduler.synced.is_set() and scheduler.mode != "filter":
            return scheduler.filter_answer(body)
        return await asyncio.get_running_loop().run_in_executor(self.executor, scheduler.filter_answer, body)

    async def bind(self, body: bytes) -> bytes:
        return await asyncio.wrap_future(self.scheduler.submit_bind(body))

    def readyz(self, _: bytes) -> Reply:
        return (200, b"ok", TEXT) if self.scheduler.ready() else (503, b"not ready", TEXT)

"""The extender's HTTP app: HAMi's routes on the shared router (`server/router.py`).

Filter and Bind answer in kube-scheduler's protocol (200 with an `Error` field), the webhook in an
AdmissionReview; 404, 405 and 413 are the router's, as in the descheduler API.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import orjson

from hami_fast.server.router import Reply, Route, Router
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
        # The webhook never blocks, so it skips the thread hop; Filter may wait on the API server (its
        # annotation patch) and runs in the pool unless the writer is in memory; Bind waits in its
        # node's queue without holding a thread.
        waits = getattr(scheduler.writer, "blocking", True)
        super().__init__(
            [
                Route("POST", "/filter", scheduler.filter, "thread" if waits else "inline", filter_error),
                Route("POST", "/bind", self.bind, "async", bind_result),
                Route("POST", "/webhook", scheduler.admit, "inline", review_error),
                Route("GET", "/healthz", lambda _: (200, b"ok", TEXT), "inline"),
                Route("GET", "/readyz", self.readyz, "inline"),
            ],
            executor,
            name="extender",
        )

    async def bind(self, body: bytes) -> bytes:
        return await asyncio.wrap_future(self.scheduler.submit_bind(body))

    def readyz(self, _: bytes) -> Reply:
        return (200, b"ok", TEXT) if self.scheduler.ready() else (503, b"not ready", TEXT)

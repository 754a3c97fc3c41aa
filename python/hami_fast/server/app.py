"""The RSGI application Granian serves: HAMi's routes, exact paths, 405 on a wrong method."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from hami_fast.server.scheduler import Scheduler, bind_result, filter_error

log = logging.getLogger("hami_fast.http")

JSON_HEADERS = [("content-type", "application/json")]
MAX_BODY = 4 * 1024 * 1024


def _content_length(scope: Any) -> int:
    try:
        return int(scope.headers.get("content-length", "-1"))
    except ValueError:
        return -1


def review_error(message: str) -> bytes:
    status = {"code": 400, "message": message}
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": "", "allowed": False, "status": status},
        }
    )


class App:
    def __init__(self, scheduler: Scheduler, executor: ThreadPoolExecutor) -> None:
        self.scheduler, self.executor = scheduler, executor
        # (method, handler, error body, runs inline): the webhook never blocks, so it skips the thread hop;
        # filter and bind may wait on the API server and run in the pool.
        waits = getattr(scheduler.writer, "blocking", True)
        self.routes: dict[str, tuple[str, Callable[[bytes], bytes] | None, Callable[[str], bytes], bool]] = {
            "/filter": ("POST", scheduler.filter, filter_error, not waits),
            "/bind": ("POST", scheduler.bind, bind_result, not waits),
            "/webhook": ("POST", scheduler.admit, review_error, True),
            "/healthz": ("GET", None, lambda m: b"", True),
            "/readyz": ("GET", None, lambda m: b"", True),
        }

    def __rsgi_init__(self, loop: Any) -> None:
        log.info("http worker started")

    def __rsgi_del__(self, loop: Any) -> None:
        log.info("http worker stopped")

    async def __rsgi__(self, scope: Any, protocol: Any) -> None:
        if scope.proto != "http":
            return
        route = self.routes.get(scope.path)
        if route is None:
            protocol.response_bytes(404, [("content-type", "text/plain")], b"404 page not found\n")
            return
        method, handler, too_big, inline = route
        if scope.method != method:
            protocol.response_bytes(
                405, [("content-type", "text/plain"), ("allow", method)], b"405 method not allowed\n"
            )
            return
        if handler is None:
            ok = scope.path == "/healthz" or self.scheduler.ready()
            protocol.response_bytes(200 if ok else 503, [("content-type", "text/plain")], b"ok" if ok else b"not ready")
            return
        body = await self._read(protocol, _content_length(scope))
        if body is None:
            protocol.response_bytes(200, JSON_HEADERS, too_big(f"request body larger than {MAX_BODY} bytes"))
            return
        try:
            if scope.path == "/bind":  # waits in the node's bind queue without holding a thread
                answer = await asyncio.wrap_future(self.scheduler.submit_bind(body))
            elif inline:
                answer = handler(body)
            else:
                answer = await asyncio.get_running_loop().run_in_executor(self.executor, handler, body)
        except Exception as exc:  # never leave kube-scheduler without an answer
            log.exception("handler failed", extra={"path": scope.path})
            answer = too_big(f"internal error: {exc}")
        protocol.response_bytes(200, JSON_HEADERS, answer)

    @staticmethod
    async def _read(protocol: Any, length: int) -> bytes | None:
        if 0 <= length <= MAX_BODY:  # the common case: one await for the whole body
            body = await protocol()
            return body if len(body) <= MAX_BODY else None
        chunks: list[bytes] = []
        size = 0
        async for chunk in protocol:
            size += len(chunk)
            if size > MAX_BODY:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

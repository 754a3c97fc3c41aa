"""The RSGI application Granian serves: HAMi's routes, exact paths, 405 on a wrong method."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from hami_fast.server.scheduler import Scheduler, bind_result, filter_error

log = logging.getLogger("hami_fast.http")

JSON_HEADERS = [("content-type", "application/json")]
MAX_BODY = 4 * 1024 * 1024


class App:
    def __init__(self, scheduler: Scheduler, executor: ThreadPoolExecutor) -> None:
        self.scheduler, self.executor = scheduler, executor
        self.routes: dict[str, tuple[str, Callable[[bytes], bytes] | None, Callable[[str], bytes]]] = {
            "/filter": ("POST", scheduler.filter, filter_error),
            "/bind": ("POST", scheduler.bind, bind_result),
            "/webhook": ("POST", scheduler.admit, lambda m: b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":false,"status":{"code":413,"message":"' + m.encode() + b'"}}}'),
            "/healthz": ("GET", None, lambda m: b""),
            "/readyz": ("GET", None, lambda m: b""),
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
        method, handler, too_big = route
        if scope.method != method:
            protocol.response_bytes(405, [("content-type", "text/plain"), ("allow", method)], b"405 method not allowed\n")
            return
        if handler is None:
            ok = scope.path == "/healthz" or self.scheduler.ready()
            protocol.response_bytes(200 if ok else 503, [("content-type", "text/plain")], b"ok" if ok else b"not ready")
            return
        body = await self._read(protocol)
        if body is None:
            protocol.response_bytes(200, JSON_HEADERS, too_big(f"request body larger than {MAX_BODY} bytes"))
            return
        loop = asyncio.get_running_loop()
        try:
            answer = await loop.run_in_executor(self.executor, handler, body)
        except Exception as exc:  # never leave kube-scheduler without an answer
            log.exception("handler failed", extra={"path": scope.path})
            answer = too_big(f"internal error: {exc}")
        protocol.response_bytes(200, JSON_HEADERS, answer)

    @staticmethod
    async def _read(protocol: Any) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        async for chunk in protocol:
            size += len(chunk)
            if size > MAX_BODY:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

"""One small RSGI router for both HTTP apps: the extender (`server/app.py`) and the descheduler API.

Behaviour, the same for every route of both apps:

| request | answer |
|---|---|
| path not in the table | 404 `{"error": "no route for GET /x"}` |
| known path, other method | 405 `{"error": ...}`, `Allow: <method>` |
| body over `MAX_BODY` (4 MiB) | 413 `{"error": "request body larger than 4194304 bytes"}`, before reading it when Content-Length says so |
| handler raises `HttpError(status, msg)` | that status, `{"error": msg}` (400 for broken JSON, naming the field) |
| handler raises `EngineError` / `ValueError` | 400 `{"error": str(exc)}` |
| handler raises `kube.errors.ApiError` | 502 `{"error": str(exc)}` (the API server failed us) |
| handler raises anything else | 500 `{"error": "internal error (<type>); see the server log"}`; the traceback goes to the log only |
| handler returns `bytes` | 200, application/json |
| handler returns `(status, bytes)` / `(status, bytes, content type)` | as given |
| handler returns `Then(reply, after)` | `reply` as above, then `after()` runs on the event loop before the next request is taken |

A route that speaks a protocol with its own error shape (`protocol_error`: Filter/Bind's `Error`
field, the webhook's AdmissionReview status) answers handler failures with 200 and that shape, as
kube-scheduler and the API server expect; oversize, 404 and 405 stay HTTP errors there too.

Handlers run `inline` on the event loop (never blocks), in the `thread` pool (may wait on the API
server), or are `async` themselves. `Then` takes a decision's bookkeeping (metrics, events, the
allocation held for Bind) off the answer's path: kube-scheduler gets the answer first, and nothing
else runs on the loop until `after()` is done, so a Bind always finds what its Filter left.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import orjson

from hami_fast._native import EngineError
from hami_fast.kube.errors import ApiError

log = logging.getLogger("hami_fast.http")

MAX_BODY = 4 * 1024 * 1024
JSON = "application/json"
JSON_HEADERS = [("content-type", JSON)]

Reply = bytes | tuple[int, bytes] | tuple[int, bytes, str]


class Then(NamedTuple):
    """A reply, and what to do right after sending it (see the module's docstring)."""

    reply: Reply
    after: Callable[[], None]


Answer = Reply | Then
Handler = Callable[[bytes], Answer]
AsyncHandler = Callable[[bytes], Awaitable[Answer]]
Run = Literal["inline", "thread", "async"]


class HttpError(Exception):
    """Raised by a handler: answer `status` with `{"error": message}`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def json_body(body: bytes, what: str = "request body") -> Any:
    """The decoded body, or HttpError 400 naming where it broke; an empty body is `{}`."""
    try:
        return orjson.loads(body.strip() or b"{}")
    except orjson.JSONDecodeError as exc:
        raise HttpError(400, f"{what}: not JSON: {exc}") from None


def error_body(message: str) -> bytes:
    return orjson.dumps({"error": message})


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler | AsyncHandler
    run: Run = "thread"
    protocol_error: Callable[[str], bytes] | None = None


class Router:
    """Exact-path routing over a table of `Route`s; the RSGI app is `Router.__rsgi__` (or a subclass)."""

    def __init__(self, routes: Iterable[Route], executor: Executor, name: str = "http") -> None:
        self.executor, self.name = executor, name
        self.routes: dict[str, Route] = {}
        for route in routes:
            self.add(route)

    def add(self, route: Route) -> None:
        if route.path in self.routes:
            raise ValueError(f"route {route.path} defined twice")
        self.routes[route.path] = route

    def __rsgi_init__(self, loop: Any) -> None:
        log.info("http worker started", extra={"app": self.name})

    def __rsgi_del__(self, loop: Any) -> None:
        log.info("http worker stopped", extra={"app": self.name})

    async def __rsgi__(self, scope: Any, protocol: Any) -> None:
        if scope.proto != "http":
            return
        route = self.routes.get(scope.path)
        if route is None:
            reply: Answer = (404, error_body(f"no route for {scope.method} {scope.path}"))
        elif scope.method != route.method:
            message = error_body(f"{scope.method} not allowed on {route.path}; use {route.method}")
            protocol.response_bytes(405, [("content-type", JSON), ("allow", route.method)], message)
            return
        else:
            if route.method == "GET":
                body: bytes | None = b""
            elif 0 <= (length := content_length(scope)) <= MAX_BODY:  # the common case: one await, no coroutine
                body = await protocol()
                body = body if len(body) <= MAX_BODY else None
            else:
                body = await read_body(protocol, length)
            if body is None:
                reply = too_large()
            elif route.run == "inline":  # no coroutine of its own: the request path of /filter and /webhook
                reply = self.call_inline(route, body)
            else:
                reply = await self.call(route, body)
        after = None
        if type(reply) is Then:
            reply, after = reply
        if type(reply) is bytes:
            protocol.response_bytes(200, JSON_HEADERS, reply)
        else:
            protocol.response_bytes(reply[0], [("content-type", reply[2] if len(reply) > 2 else JSON)], reply[1])
        if after is not None:
            run_after(after, scope.path)

    async def call(self, route: Route, body: bytes) -> Answer:
        """The handler's reply, or the error reply the table above gives for what it raised."""
        if route.run == "inline":
            return self.call_inline(route, body)
        try:
            if route.run == "async":
                return await route.handler(body)  # type: ignore[misc]
            return await asyncio.get_running_loop().run_in_executor(self.executor, route.handler, body)  # type: ignore[arg-type]
        except Exception as exc:
            return self._error(route, exc)

    def call_inline(self, route: Route, body: bytes) -> Answer:
        try:
            return route.handler(body)  # type: ignore[return-value]
        except Exception as exc:
            return self._error(route, exc)

    def _error(self, route: Route, exc: Exception) -> Reply:
        if isinstance(exc, HttpError):
            return self._failed(route, exc.status, exc.message)
        if isinstance(exc, EngineError | ValueError):
            return self._failed(route, 400, str(exc))
        if isinstance(exc, ApiError):
            return self._failed(route, 502, str(exc))
        log.exception("handler failed", extra={"path": route.path}, exc_info=exc)
        return self._failed(route, 500, f"internal error ({type(exc).__name__}); see the server log")

    @staticmethod
    def _failed(route: Route, status: int, message: str) -> Reply:
        if route.protocol_error is not None:
            return route.protocol_error(message)
        return (status, error_body(message))


def run_after(after: Callable[[], None], path: str) -> None:
    """A reply's follow-up; its failure is logged (the answer is already sent)."""
    try:
        after()
    except Exception as exc:
        log.exception("work after the answer failed", extra={"path": path}, exc_info=exc)


def settle(answer: Answer) -> Reply:
    """The reply of a handler's answer, its follow-up done first (for callers outside the router)."""
    if type(answer) is Then:
        answer.after()
        return answer.reply
    return answer  # type: ignore[return-value]


def content_length(scope: Any) -> int:
    try:
        return int(scope.headers.get("content-length", "-1"))
    except ValueError:
        return -1


def too_large() -> Reply:
    return (413, error_body(f"request body larger than {MAX_BODY} bytes"))


async def read_body(protocol: Any, length: int) -> bytes | None:
    """The whole body, or None once it passes MAX_BODY (without reading on when Content-Length says so)."""
    if length > MAX_BODY:
        return None
    if length >= 0:  # the common case: one await for the whole body
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

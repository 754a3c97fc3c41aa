"""The same hami-fast handlers behind a plain ASGI app, to compare servers with identical work."""

from __future__ import annotations

import asyncio
from typing import Any

from hami_fast.server.app import App


def asgi(app: App) -> Any:
    async def handle(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        route = app.routes.get(scope["path"])
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if route is None or route[1] is None:
            status, answer = (404, b"") if route is None else (200, b"ok")
        else:
            _, handler, _, inline = route
            status = 200
            answer = (
                handler(body)
                if inline
                else await asyncio.get_running_loop().run_in_executor(app.executor, handler, body)
            )
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
        )
        await send({"type": "http.response.body", "body": answer})

    return handle

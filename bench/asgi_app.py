"""The same hami-fast handlers behind a plain ASGI app, to compare servers with identical work."""

from __future__ import annotations

from typing import Any

from hami_fast.server.router import JSON, Router, error_body


def asgi(app: Router) -> Any:
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
        reply = (404, error_body("no route")) if route is None else await app.call(route, body)
        status, answer, kind = (200, reply, JSON) if type(reply) is bytes else (*reply, JSON)[:3]
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", kind.encode())]})
        await send({"type": "http.response.body", "body": answer})

    return handle

"""Run hami-fast serve in-process on a free port for tests, and talk to it over real HTTP(S)."""

from __future__ import annotations

import asyncio
import http.client
import socket
import ssl
import threading
from typing import Any

import orjson
from hami_fast.config import Config
from hami_fast.server.serve import Runtime, build_runtime, run_http


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(kubeapi: Any, **options: Any) -> Service:
    """hami-fast serve on the test API server `kubeapi` (start it with `with`)."""
    return Service(kubeconfig=kubeapi.kubeconfig, **options)


class Service:
    """A serving hami-fast: `.post(route, body)` over HTTP, `.runtime` for the engine's state."""

    def __init__(self, ca_file: str | None = None, **options: Any) -> None:
        self.port = free_port()
        options.setdefault("metrics_bind_address", "")
        options.setdefault("watch_timeout", 5)
        self.config = Config(http_bind=f"127.0.0.1:{self.port}", **options)
        self.ca_file = ca_file
        self.runtime: Runtime | None = None
        self.thread: threading.Thread | None = None

    def __enter__(self) -> Service:
        self.runtime = build_runtime(self.config)
        ready = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(run_http(self.runtime, ready)), daemon=True)
        self.thread.start()
        assert ready.wait(15), "hami-fast did not start"
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        if self.runtime:
            self.runtime.stop.set()
        if self.thread:
            self.thread.join(timeout=15)

    def connection(self) -> http.client.HTTPConnection:
        if self.config.tls:
            context = ssl.create_default_context(cafile=self.ca_file)
            return http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=30)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def request(self, method: str, route: str, body: bytes | None = None) -> tuple[int, bytes]:
        conn = self.connection()
        try:
            conn.request(method, route, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def post(self, route: str, body: Any) -> Any:
        status, data = self.request("POST", route, orjson.dumps(body))
        assert status == 200, (status, data)
        return orjson.loads(data)

    @property
    def cluster(self) -> Any:
        assert self.runtime
        return self.runtime.cluster

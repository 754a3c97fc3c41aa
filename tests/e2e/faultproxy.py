"""An HTTPS proxy in front of kube-apiserver that slows down and fails requests by rule.

The test API server injects faults into its own answers; a real kube-apiserver cannot, so this
proxy stands between one client (hami-fast) and it. Every request is forwarded (watches streamed
chunk by chunk, the client's bearer token passed on); a rule matching the request's method and path
may first add latency, then answer an error instead (`status`, with `Retry-After` when set), either
without forwarding or after forwarding and dropping the real answer (`lost`: the write was made, the
client does not know). Rules draw from a seeded random source; every injected fault is counted.
"""

from __future__ import annotations

import http.client
import random
import re
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import orjson

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host"}
REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


@dataclass
class Fault:
    """`share` of the requests matching `method` and `path` (a regex on the path, query excluded)."""

    name: str
    method: str
    path: str
    share: float
    latency: float = 0.0
    status: int = 0
    lost: bool = False
    retry_after: int | None = None

    def matches(self, method: str, path: str) -> bool:
        return (self.method in ("*", method)) and re.search(self.path, path) is not None


class FaultProxy:
    def __init__(self, upstream: str, ca_file: str, cert_file: str, key_file: str, seed: int = 0) -> None:
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname or "127.0.0.1", parts.port or 443
        self.upstream_ctx = ssl.create_default_context(cafile=ca_file)
        self.faults: list[Fault] = []
        self.injected: Counter[str] = Counter()
        self.forwarded = 0
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.server.daemon_threads = True
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert_file, key_file)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="fault-proxy", daemon=True)

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def draw(self, method: str, path: str) -> list[Fault]:
        """The faults this request meets: every matching latency rule, and at most one error."""
        chosen: list[Fault] = []
        with self._lock:
            for fault in self.faults:
                if not fault.matches(method, path) or self._random.random() >= fault.share:
                    continue
                if fault.status and any(f.status for f in chosen):
                    continue
                chosen.append(fault)
                self.injected[fault.name] += 1
        return chosen

    def count_forwarded(self) -> None:
        with self._lock:
            self.forwarded += 1

    def connect(self, timeout: float | None) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            self.upstream_host, self.upstream_port, context=self.upstream_ctx, timeout=timeout
        )


def _handler_for(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        _answering = False  # the upstream answer's status line is sent

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            pass

        def do_GET(self) -> None:
            self._forward()

        do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

        def _forward(self) -> None:
            self._answering = False
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            faults = proxy.draw(self.command, urlsplit(self.path).path)
            time.sleep(sum(f.latency for f in faults))
            error = next((f for f in faults if f.status), None)
            if error is not None and not error.lost:
                return self._answer_error(error)
            upstream = proxy.connect(None if "watch=" in self.path else 60)
            try:
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                proxy.count_forwarded()
                if error is not None:  # made upstream, the answer lost on the way back
                    answer.read()
                    return self._answer_error(error)
                self._relay(answer)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                # The API server went away mid-answer, or the client did: this connection ends.
                self.close_connection = True
                if not self.wfile.closed and not self._answering:
                    self._answer_error(Fault("upstream", "*", "", 1.0, status=503), str(exc))
            finally:
                upstream.close()

        def _relay(self, answer: http.client.HTTPResponse) -> None:
            self._answering = True  # from here on an error can only cut the connection
            self.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                    self.send_header(key, value)
            if answer.chunked or answer.length is None:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._stream(answer)
            else:
                data = answer.read()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        def _stream(self, answer: http.client.HTTPResponse) -> None:
            while chunk := answer.read1(65536):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        def handle(self) -> None:
            try:
                super().handle()
            except (OSError, ValueError):  # the client hung up
                self.close_connection = True

        def _answer_error(self, fault: Fault, detail: str = "") -> None:
            reason = REASONS.get(fault.status, "InternalError")
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": detail or f"injected by the fault proxy: {fault.name}",
                "reason": reason,
                "code": fault.status,
            }
            data = orjson.dumps(status)
            self.send_response(fault.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if fault.retry_after is not None:
                self.send_header("Retry-After", str(fault.retry_after))
            self.end_headers()
            self.wfile.write(data)

    return Handler

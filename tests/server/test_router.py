"""The shared RSGI router (server/router.py): one behaviour table, checked over real HTTP (Granian) for
both apps that use it, the extender (server/app.py) and the descheduler API (descheduler/api.py)."""

from __future__ import annotations

import asyncio
import http.client
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
from granian.constants import Interfaces
from granian.server.embed import Server
from hami_fast._native import EngineError
from hami_fast.config import Config
from hami_fast.descheduler.api import ApiApp, Source
from hami_fast.kube.errors import api_error
from hami_fast.server.app import App
from hami_fast.server.listen import start_listening
from hami_fast.server.router import MAX_BODY, HttpError, Route, Router, Then, settle
from hami_fast.server.serve import build_runtime
from k8s_objects import filter_args, gpu_node, gpu_pod
from serving import free_port

NODES = [gpu_node("n1"), gpu_node("n2")]
SNAPSHOT = orjson.dumps({"apiVersion": "v1", "kind": "List", "items": NODES})


@contextmanager
def serving(app: Any) -> Iterator[int]:
    port = free_port()
    ready, stop = threading.Event(), threading.Event()

    async def main() -> None:
        server = Server(app, address="127.0.0.1", port=port, interface=Interfaces.RSGI, log_enabled=False)
        task = await start_listening(server, f"127.0.0.1:{port}")
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.02)
        server.stop()
        await task

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    assert ready.wait(15), "Granian did not start"
    try:
        yield port
    finally:
        stop.set()
        thread.join(15)


def request(
    port: int, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def extender(tmp_path_factory) -> Iterator[tuple[int, App]]:
    path = tmp_path_factory.mktemp("router") / "cluster.json"
    path.write_bytes(SNAPSHOT)
    runtime = build_runtime(Config(snapshot=str(path), metrics_bind_address=""))
    app = App(runtime.scheduler, ThreadPoolExecutor(4))
    with serving(app) as port:
        yield port, app
    runtime.stop.set()
    runtime.scheduler.close()


@pytest.fixture(scope="module")
def descheduler() -> Iterator[tuple[int, ApiApp]]:
    app = ApiApp(Source(snapshot=SNAPSHOT), None, lambda: True, ThreadPoolExecutor(4))
    with serving(app) as port:
        yield port, app


# Per app: a POST route, a GET route, and the healthz body it has always answered.
APPS = {
    "extender": ("/filter", "/healthz", (b"ok", "text/plain")),
    "descheduler": ("/api/v1/plan", "/healthz", (b'{"status": "ok"}', "application/json")),
}


@pytest.fixture(params=list(APPS))
def app(request, extender, descheduler) -> tuple[str, int, Router]:
    port, router = extender if request.param == "extender" else descheduler
    return request.param, port, router


def error_of(data: bytes) -> str:
    return orjson.loads(data)["error"]


# -- the table, for both apps ---------------------------------------------------------------------


def test_unknown_path_is_404_json(app):
    _, port, _ = app
    status, headers, data = request(port, "GET", "/nope")
    assert (status, headers["content-type"]) == (404, "application/json")
    assert error_of(data) == "no route for GET /nope"


def test_wrong_method_is_405_with_allow(app):
    name, port, _ = app
    post_route, get_route, _ = APPS[name]
    status, headers, data = request(port, "GET", post_route)
    assert (status, headers["allow"], headers["content-type"]) == (405, "POST", "application/json")
    assert "use POST" in error_of(data)
    assert request(port, "POST", get_route, b"{}")[0] == 405


def test_healthz_answers_as_it_always_did(app):
    name, port, _ = app
    status, headers, data = request(port, "GET", "/healthz")
    assert (status, data, headers["content-type"]) == (200, *APPS[name][2])


def test_oversize_body_is_413_by_content_length(app):
    name, port, _ = app
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest("POST", APPS[name][0])
    conn.putheader("Content-Length", str(MAX_BODY + 1))
    conn.endheaders()
    try:  # the answer may come before the body is sent: the server does not read it
        conn.send(b" " * (MAX_BODY + 1))
    except (BrokenPipeError, ConnectionResetError):
        pass
    response = conn.getresponse()
    assert response.status == 413
    assert error_of(response.read()) == f"request body larger than {MAX_BODY} bytes"
    conn.close()


def test_oversize_chunked_body_is_413(app):
    name, port, _ = app
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    chunks = (b" " * (1024 * 1024) for _ in range(5))
    try:
        conn.request("POST", APPS[name][0], body=chunks, encode_chunked=True)
    except (BrokenPipeError, ConnectionResetError):
        pass
    response = conn.getresponse()
    assert response.status == 413 and "larger than" in error_of(response.read())
    conn.close()


def test_a_body_at_the_limit_is_read(app):
    """Exactly MAX_BODY bytes is not too large: it reaches the handler (which finds it is not JSON)."""
    name, port, _ = app
    status, _, data = request(port, "POST", APPS[name][0], b" " * (MAX_BODY - 2) + b"{]")
    assert status != 413, data


# -- per-app protocol shapes ----------------------------------------------------------------------


def test_descheduler_broken_json_is_400_naming_the_body_and_the_field(descheduler):
    port, _ = descheduler
    status, _, data = request(port, "POST", "/api/v1/plan", b"{nope")
    assert status == 400 and error_of(data).startswith("request body: not JSON:")
    status, _, data = request(port, "POST", "/api/v1/placements/validate", b'{"pod": "ns/p", "gpuDevices": []}')
    assert status == 400 and "field 'nodeName' is required" in error_of(data)
    status, _, data = request(port, "POST", "/api/v1/placements/validate", b"[1]")
    assert status == 400 and error_of(data).startswith("request body: want")


def test_extender_keeps_kube_scheduler_s_protocol_for_filter_errors(extender):
    port, _ = extender
    status, _, data = request(port, "POST", "/filter", b"{nope")
    answer = orjson.loads(data)
    assert status == 200 and "ExtenderArgs" in answer["Error"] and answer["NodeNames"] is None
    status, _, data = request(port, "POST", "/bind", b"{nope")
    assert status == 200 and orjson.loads(data)["Error"] != ""


def test_extender_filter_answer_is_the_engine_s_bytes(extender):
    port, app = extender
    body = orjson.dumps(filter_args(gpu_pod("p1", gpu=1, mem=1000), ["n1", "n2"]))
    status, headers, data = request(port, "POST", "/filter", body)
    assert (status, headers["content-type"]) == (200, "application/json")
    assert orjson.loads(data)["Error"] == "" and len(orjson.loads(data)["NodeNames"]) == 1


def test_a_crashing_handler_is_500_without_traceback_or_the_protocol_error(extender, descheduler, monkeypatch):
    def boom(*_: Any) -> Any:
        raise RuntimeError("secret detail /etc/passwd")

    d_port, d_app = descheduler
    monkeypatch.setattr(d_app.source.view, "fragmentation", boom)
    status, _, data = request(d_port, "GET", "/api/v1/fragmentation")
    assert status == 500 and error_of(data) == "internal error (RuntimeError); see the server log"
    assert b"Traceback" not in data and b"secret" not in data

    class Broken:
        decide = review = staticmethod(boom)

    e_port, e_app = extender
    monkeypatch.setattr(e_app.scheduler, "cluster", Broken())
    status, _, data = request(e_port, "POST", "/filter", orjson.dumps(filter_args(gpu_pod("p2", gpu=1), ["n1"])))
    answer = orjson.loads(data)
    assert status == 200 and answer["Error"].startswith("internal error (RuntimeError)") and b"Traceback" not in data
    status, _, data = request(e_port, "POST", "/webhook", b"{}")
    review = orjson.loads(data)["response"]
    assert status == 200 and review["allowed"] is False and review["status"]["code"] == 400


def admission(pod: dict) -> bytes:
    return orjson.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u1", "object": pod}}
    )


def test_webhook_verdict_comes_typed_from_the_engine(extender):
    """The binding says whether it admitted (no byte search in the answer); the metric follows it."""
    port, app = extender
    privileged = gpu_pod("priv", gpu=1)
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    cases = [(gpu_pod("w1", gpu=1), True), (privileged, False), ({"kind": "Pod"}, False)]
    for pod, allowed in cases:
        answer, verdict = app.scheduler.cluster.review(admission(pod))
        assert verdict is allowed and orjson.loads(answer)["response"]["allowed"] is allowed
        assert answer == app.scheduler.cluster.admit(admission(pod))
    assert app.scheduler.cluster.review(b"{nope")[1] is False
    counter = app.scheduler.metrics.webhook_results
    before = {r: counter.labels(r)._value.get() for r in ("allowed", "denied")}
    for pod, _ in cases:
        assert request(port, "POST", "/webhook", admission(pod))[0] == 200
    after = {r: counter.labels(r)._value.get() for r in ("allowed", "denied")}
    assert (after["allowed"] - before["allowed"], after["denied"] - before["denied"]) == (1, 2)


# -- the mapping itself, on a router of its own ---------------------------------------------------


def raises(exc: Exception):
    def handler(_: bytes) -> bytes:
        raise exc

    return handler


async def echo_async(body: bytes) -> bytes:
    return body


@pytest.fixture(scope="module")
def table() -> Iterator[int]:
    routes = [
        Route("POST", "/http-error", raises(HttpError(422, "field x: bad")), "inline"),
        Route("POST", "/engine-error", raises(EngineError("pod ns/p: field y")), "thread"),
        Route("POST", "/api-error", raises(api_error(404, "NotFound", "pods p not found", "GET", "/p")), "thread"),
        Route("POST", "/bug", raises(KeyError("k")), "thread"),
        Route("POST", "/async", echo_async, "async"),
        Route("GET", "/html", lambda _: (201, b"<p>hi</p>", "text/html; charset=utf-8"), "inline"),
        Route("POST", "/shaped", raises(KeyError("k")), "inline", lambda m: orjson.dumps({"Error": m})),
    ]
    with serving(Router(routes, ThreadPoolExecutor(2), name="table")) as port:
        yield port


@pytest.mark.parametrize(
    ("path", "status", "error"),
    [
        ("/http-error", 422, "field x: bad"),
        ("/engine-error", 400, "pod ns/p: field y"),
        ("/api-error", 502, "GET /p: 404 NotFound: pods p not found"),
        ("/bug", 500, "internal error (KeyError); see the server log"),
    ],
)
def test_error_mapping(table, path, status, error):
    got, headers, data = request(table, "POST", path, b"{}")
    assert (got, headers["content-type"], error_of(data)) == (status, "application/json", error)


def test_replies_async_and_content_type(table):
    assert request(table, "POST", "/async", b'{"a": 1}')[::2] == (200, b'{"a": 1}')
    status, headers, data = request(table, "GET", "/html")
    assert (status, headers["content-type"], data) == (201, "text/html; charset=utf-8", b"<p>hi</p>")
    status, _, data = request(table, "POST", "/shaped", b"{}")
    assert status == 200 and orjson.loads(data) == {"Error": "internal error (KeyError); see the server log"}


def test_a_path_twice_is_refused():
    route = Route("GET", "/x", lambda _: b"")
    with pytest.raises(ValueError, match="defined twice"):
        Router([route, route], ThreadPoolExecutor(1))


# -- answers first, bookkeeping right after; where /filter runs -----------------------------------


def test_then_answers_before_its_follow_up_and_before_the_next_request(caplog):
    order: list[str] = []
    release = threading.Event()

    def first(_: bytes) -> Then:
        order.append("first")
        return Then(b'{"n": 1}', lambda: (order.append("after"), release.wait(0.3)))

    def second(_: bytes) -> bytes:
        order.append("second")
        return b'{"n": 2}'

    def broken(_: bytes) -> Then:
        return Then(b'{"n": 3}', lambda: 1 / 0)

    routes = [
        Route("POST", "/first", first, "inline"),
        Route("POST", "/second", second, "inline"),
        Route("POST", "/broken", broken, "thread"),
    ]
    with serving(Router(routes, ThreadPoolExecutor(1))) as port:
        assert request(port, "POST", "/first", b"{}")[::2] == (200, b'{"n": 1}')
        assert request(port, "POST", "/second", b"{}")[::2] == (200, b'{"n": 2}')
        assert order == ["first", "after", "second"], "the follow-up ran before the loop took the next request"
        assert request(port, "POST", "/broken", b"{}")[::2] == (200, b'{"n": 3}'), "a failed follow-up keeps its answer"
    assert settle(Then(b"x", lambda: order.append("settled"))) == b"x" and order[-1] == "settled"
    assert any("work after the answer failed" in r.getMessage() for r in caplog.records)


class FakeScheduler:
    """What App reads of a Scheduler, recording the thread each Filter ran on."""

    def __init__(self, mode: str, synced: bool) -> None:
        self.writer = type("Blocking", (), {"blocking": True})()
        self.mode, self.synced, self.threads = mode, threading.Event(), []
        if synced:
            self.synced.set()

    def filter_answer(self, body: bytes) -> bytes:
        self.threads.append(threading.current_thread().name)
        if not self.synced.wait(5):
            return b'{"Error": "context cancelled: caches not synced"}'
        return b'{"Error": ""}'

    def ready(self) -> bool:
        return self.synced.is_set()

    def admit(self, body: bytes) -> bytes:
        return body


@pytest.mark.parametrize(
    ("mode", "synced", "pool"), [("bind", True, False), ("filter", True, True), ("bind", False, True)]
)
def test_filter_answers_on_the_loop_unless_it_may_wait(mode, synced, pool):
    """Against the API server, /filter skips the thread hop once synced and when nothing is written
    before the answer; while it waits for the caches (as HAMi's Filter does) the loop stays free."""
    scheduler = FakeScheduler(mode, synced)
    app = App(scheduler, ThreadPoolExecutor(1, thread_name_prefix="pool"))  # type: ignore[arg-type]
    with serving(app) as port:
        waiting = ThreadPoolExecutor(1).submit(request, port, "POST", "/filter", b"{}")
        if not synced:
            deadline = time.monotonic() + 10
            while not scheduler.threads and time.monotonic() < deadline:  # Filter is waiting for the sync
                time.sleep(0.01)
            assert request(port, "GET", "/readyz")[0] == 503, "the loop answers while Filter waits"
            scheduler.synced.set()
        assert waiting.result(10)[::2] == (200, b'{"Error": ""}')
    assert len(scheduler.threads) == 1 and scheduler.threads[0].startswith("pool") is pool, scheduler.threads

"""Round trips over real HTTP at concurrency 1 (as kube-scheduler calls /filter): Granian (the product's
server, embedded, RSGI) next to uvicorn (plain ASGI) running the same handlers, on a 5,000-node snapshot.
"""

from __future__ import annotations

import http.client
import statistics
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest
from clusters import build
from k8s_objects import gpu_pod
from serving import Service, free_port

NODES = 5000


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    nodes, pods = build(NODES)
    path = tmp_path_factory.mktemp("snap") / "cluster.json"
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": nodes + pods}))
    return path


@pytest.fixture(scope="module")
def granian(snapshot):
    with Service(snapshot=str(snapshot)) as svc:
        yield svc.port, svc


@pytest.fixture(scope="module")
def uvicorn_server(granian):
    import uvicorn
    from asgi_app import asgi
    from hami_fast.server.app import App

    _, svc = granian
    port = free_port()
    app = asgi(App(svc.runtime.scheduler, ThreadPoolExecutor(8)))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        threading.Event().wait(0.05)
    yield port
    server.should_exit = True
    thread.join(10)


def filter_body() -> bytes:
    names = [f"n{i:05d}" for i in range(0, NODES, NODES // 500)]
    return orjson.dumps(
        {"Pod": gpu_pod("bench", namespace="bench", gpu=1, mem=1000, cores=5), "Nodes": None, "NodeNames": names}
    )


def review_body() -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u", "object": gpu_pod("w", gpu=1)},
        }
    )


def round_trip(conn: http.client.HTTPConnection, route: str, body: bytes) -> bytes:
    conn.request("POST", route, body=body, headers={"Content-Type": "application/json"})
    return conn.getresponse().read()


def run(benchmark, port: int, route: str, body: bytes) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        answer = benchmark.pedantic(round_trip, args=(conn, route, body), rounds=2000, iterations=1, warmup_rounds=50)
    finally:
        conn.close()
    data = sorted(benchmark.stats.stats.data)
    benchmark.extra_info["p50_us"] = round(statistics.median(data) * 1e6, 1)
    benchmark.extra_info["p99_us"] = round(data[int(0.99 * (len(data) - 1))] * 1e6, 1)
    return answer


@pytest.mark.benchmark(group="/filter over HTTP, 5k nodes, 500 names, concurrency 1")
def test_filter_granian(benchmark, granian) -> None:
    assert orjson.loads(run(benchmark, granian[0], "/filter", filter_body()))["Error"] == ""


@pytest.mark.benchmark(group="/filter over HTTP, 5k nodes, 500 names, concurrency 1")
def test_filter_uvicorn(benchmark, uvicorn_server) -> None:
    assert orjson.loads(run(benchmark, uvicorn_server, "/filter", filter_body()))["Error"] == ""


@pytest.mark.benchmark(group="/webhook over HTTP, concurrency 1")
def test_webhook_granian(benchmark, granian) -> None:
    assert orjson.loads(run(benchmark, granian[0], "/webhook", review_body()))["response"]["allowed"]


@pytest.mark.benchmark(group="/webhook over HTTP, concurrency 1")
def test_webhook_uvicorn(benchmark, uvicorn_server) -> None:
    assert orjson.loads(run(benchmark, uvicorn_server, "/webhook", review_body()))["response"]["allowed"]

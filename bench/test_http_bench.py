"""Round trips over real HTTP to the served extender (Granian + Rust engine), on the demo cluster."""

from __future__ import annotations

import http.client

import orjson
import pytest

from k8s_objects import gpu_pod
from serving import Service


@pytest.fixture(scope="module")
def service():
    with Service(demo=True) as svc:
        yield svc


@pytest.fixture
def connection(service):
    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=30)
    yield conn
    conn.close()


def post(conn: http.client.HTTPConnection, route: str, body: bytes) -> bytes:
    conn.request("POST", route, body=body, headers={"Content-Type": "application/json"})
    return conn.getresponse().read()


@pytest.mark.benchmark(group="HTTP round trip (keep-alive), 50-node demo cluster")
def test_http_filter(benchmark, service, connection) -> None:
    names = [f"demo-gpu-{i:03d}" for i in range(50)]
    body = orjson.dumps({"Pod": gpu_pod("bench", gpu=1, mem=1, cores=0), "NodeNames": names})
    answer = benchmark(post, connection, "/filter", body)
    assert orjson.loads(answer)["Error"] == ""


@pytest.mark.benchmark(group="HTTP round trip (keep-alive), 50-node demo cluster")
def test_http_webhook(benchmark, service, connection) -> None:
    review = orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "object": gpu_pod("w", gpu=1)}})
    answer = benchmark(post, connection, "/webhook", review)
    assert orjson.loads(answer)["response"]["allowed"] is True


@pytest.mark.benchmark(group="HTTP round trip (keep-alive), 50-node demo cluster")
def test_http_healthz(benchmark, service, connection) -> None:
    def get() -> int:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        response.read()
        return response.status

    assert benchmark(get) == 200

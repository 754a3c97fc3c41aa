"""/filter over HTTP against the floor, side by side in one run.

`hami-fast serve --snapshot` (5,000 nodes x 8 GPUs, product defaults, its own process) and a trivial
Granian server (`trivial_server.py`: same Granian settings, reads the body, answers the same bytes
hami-fast answers) take the same /filter request with 500 candidate names at concurrency 1, as
kube-scheduler sends it. The two are measured in alternating blocks so machine load falls on both
alike; the summary is the ratio of their p50 and p99 (targets: p50 <= 1.3x, p99 <= 1.5x). Not a timed
test: the ratio is reported, never asserted.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson
import pytest
from clusters import build
from k8s_objects import gpu_pod
from serving import free_port

HERE = Path(__file__).resolve().parent
NODES = 5000
BLOCKS = int(os.environ.get("HTTP_RATIO_BLOCKS", "10"))
PER_BLOCK = int(os.environ.get("HTTP_RATIO_PER_BLOCK", "300"))
TARGETS = {"p50": 1.3, "p99": 1.5}


def filter_body() -> bytes:
    names = [f"n{i:05d}" for i in range(0, NODES, NODES // 500)]
    pod = gpu_pod("bench", namespace="bench", gpu=1, mem=1000, cores=5)
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


def start(cmd: list[str], port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return proc
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"server did not start: {cmd}")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    d = tmp_path_factory.mktemp("ratio")
    nodes, pods = build(NODES)
    (d / "cluster.json").write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": nodes + pods}))
    product_port, trivial_port = free_port(), free_port()
    serve = [sys.executable, "-m", "hami_fast.cli", "serve", "--snapshot", str(d / "cluster.json")]
    product = start([*serve, "--http_bind", f"127.0.0.1:{product_port}", "--metrics-bind-address", ""], product_port)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", product_port, timeout=30)
        answer = post(conn, filter_body())
        conn.close()
        assert orjson.loads(answer)["Error"] == "", answer
        (d / "answer.json").write_bytes(answer)
        trivial_cmd = [sys.executable, str(HERE / "trivial_server.py"), str(trivial_port), str(d / "answer.json")]
        trivial = start(trivial_cmd, trivial_port)
        try:
            yield {"trivial Granian": trivial_port, "hami-fast /filter": product_port}, len(answer)
        finally:
            trivial.terminate()
            trivial.wait(10)
    finally:
        product.terminate()
        product.wait(10)


def post(conn: http.client.HTTPConnection, body: bytes) -> bytes:
    conn.request("POST", "/filter", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    assert response.status == 200, (response.status, data)
    return data


def percentile(data: list[float], q: float) -> float:
    ordered = sorted(data)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(ports: dict[str, int], body: bytes) -> dict[str, list[float]]:
    conns = {side: http.client.HTTPConnection("127.0.0.1", port, timeout=30) for side, port in ports.items()}
    samples: dict[str, list[float]] = {side: [] for side in ports}
    try:
        for conn in conns.values():
            for _ in range(100):  # warm-up: connection, caches, the engine's candidate cache
                post(conn, body)
        for block in range(BLOCKS):
            order = list(conns) if block % 2 == 0 else list(reversed(conns))
            for side in order:
                conn, out = conns[side], samples[side]
                for _ in range(PER_BLOCK):
                    started = time.perf_counter()
                    post(conn, body)
                    out.append(time.perf_counter() - started)
    finally:
        for conn in conns.values():
            conn.close()
    return samples


def test_filter_vs_trivial_granian(benchmark, servers) -> None:
    ports, answer_size = servers
    body = filter_body()
    samples = benchmark.pedantic(measure, args=(ports, body), rounds=1, iterations=1)
    stats = {side: {"p50": percentile(s, 0.5) * 1e6, "p99": percentile(s, 0.99) * 1e6} for side, s in samples.items()}
    floor, ours = stats["trivial Granian"], stats["hami-fast /filter"]
    ratio = {q: ours[q] / floor[q] for q in ("p50", "p99")}
    benchmark.extra_info.update(
        {f"{side} {q}_us": round(v, 1) for side, s in stats.items() for q, v in s.items()}
        | {f"ratio_{q}": round(r, 2) for q, r in ratio.items()}
    )
    n = BLOCKS * PER_BLOCK
    lines = [
        "",
        f"/filter over HTTP, {NODES} nodes x 8 GPUs, 500 names, concurrency 1, {n} requests per side in {BLOCKS}"
        f" alternating blocks; request {len(body)} B, answer {answer_size} B",
        *(f"  {side:<18} p50 {s['p50']:7.0f} us   p99 {s['p99']:7.0f} us" for side, s in stats.items()),
        "  ratio              "
        + "   ".join(
            f"{q} {ratio[q]:.2f}x (target <= {TARGETS[q]}x: {'met' if ratio[q] <= TARGETS[q] else 'NOT met'})"
            for q in ("p50", "p99")
        ),
    ]
    print("\n".join(lines))

"""/filter over HTTP against the floor, side by side in one run.

`hami-fast serve --snapshot` (5,000 nodes x 8 GPUs, product defaults, its own process) and a trivial
Granian server (`trivial_server.py`: same Granian settings, reads the body, answers the same bytes
hami-fast answers) take the same /filter requests with 500 candidate names at concurrency 1, as
kube-scheduler sends them: it walks its node list from a start index that advances every cycle, so
each request names another window of 500 nodes (`HTTP_RATIO_LISTS` windows, 500 by default, the start
`HTTP_RATIO_STEP` nodes on from the last one, 101 by default: each window shares 399 names with the
one before, and no list comes again for 500 requests). The trivial server answers request i with the
bytes hami-fast answered to the same body. The two are measured in alternating blocks so machine load
falls on both alike; the summary is the ratio of their p50 and p99 (targets: p50 <= 1.3x,
p99 <= 1.5x). Not a timed test: the ratio is reported, never asserted.

`HTTP_RATIO_BEFORE=DIR` serves a third process from an older `hami_fast` package in DIR (its `.so`
built from another commit) in the same blocks, reported beside the others.
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
NAMES = 500
LISTS = int(os.environ.get("HTTP_RATIO_LISTS", "500"))
STEP = int(os.environ.get("HTTP_RATIO_STEP", "101"))
BEFORE = os.environ.get("HTTP_RATIO_BEFORE", "")
TARGETS = {"p50": 1.3, "p99": 1.5}


def filter_bodies() -> list[bytes]:
    """One body per window: `NAMES` nodes from a start that advances `STEP` nodes per request (wrapping)."""
    pod = gpu_pod("bench", namespace="bench", gpu=1, mem=1000, cores=5)
    starts = [(k * STEP) % NODES for k in range(LISTS)]
    windows = [[f"n{(start + i) % NODES:05d}" for i in range(NAMES)] for start in starts]
    return [orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}) for names in windows]


def start(cmd: list[str], port: int, path: str = "") -> subprocess.Popen:
    paths = [path, str(HERE), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
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


def serve_cmd(cluster: Path, port: int) -> list[str]:
    serve = [sys.executable, "-m", "hami_fast.cli", "serve", "--snapshot", str(cluster)]
    return [*serve, "--http_bind", f"127.0.0.1:{port}", "--metrics-bind-address", ""]


def answers_of(port: int, bodies: list[bytes]) -> list[bytes]:
    """hami-fast's answer to each body in turn (the pod's own last reservation is released at each
    call, so the answer to a body is the same whenever it comes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        return [post(conn, body) for body in bodies]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    d = tmp_path_factory.mktemp("ratio")
    nodes, pods = build(NODES)
    (d / "cluster.json").write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": nodes + pods}))
    bodies = filter_bodies()
    ports = {"trivial Granian": free_port(), "hami-fast /filter": free_port()}
    procs = [start(serve_cmd(d / "cluster.json", ports["hami-fast /filter"]), ports["hami-fast /filter"])]
    try:
        answers = answers_of(ports["hami-fast /filter"], bodies)
        assert all(orjson.loads(a)["Error"] == "" for a in answers), answers[0]
        assert len({orjson.loads(a)["NodeNames"][0] for a in answers}) > 1, "every window chose the same node"
        (d / "answers.json").write_bytes(orjson.dumps([a.decode() for a in answers]))
        trivial_cmd = [sys.executable, str(HERE / "trivial_server.py"), str(ports["trivial Granian"])]
        procs.append(start([*trivial_cmd, str(d / "answers.json")], ports["trivial Granian"]))
        if BEFORE:
            ports["before /filter"] = free_port()
            procs.append(start(serve_cmd(d / "cluster.json", ports["before /filter"]), ports["before /filter"], BEFORE))
            assert answers_of(ports["before /filter"], bodies) == answers, "the older build answers otherwise"
        yield ports, bodies, answers
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


def post(conn: http.client.HTTPConnection, body: bytes) -> bytes:
    conn.request("POST", "/filter", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    assert response.status == 200, (response.status, data)
    return data


def percentile(data: list[float], q: float) -> float:
    ordered = sorted(data)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(ports: dict[str, int], bodies: list[bytes], answers: list[bytes] | None = None) -> dict[str, list[float]]:
    """Each side takes the bodies in turn (the trivial server answers its requests in the same turn);
    with `answers`, every answer is compared with hami-fast's, outside the timed part."""
    conns = {side: http.client.HTTPConnection("127.0.0.1", port, timeout=30) for side, port in ports.items()}
    samples: dict[str, list[float]] = {side: [] for side in ports}
    sent = dict.fromkeys(ports, 0)
    wrong = dict.fromkeys(ports, 0)

    def send(side: str) -> float:
        k = sent[side] % len(bodies)
        started = time.perf_counter()
        data = post(conns[side], bodies[k])
        took = time.perf_counter() - started
        sent[side] += 1
        wrong[side] += answers is not None and data != answers[k]
        return took

    try:
        for side in conns:
            for _ in range(100):  # warm-up: connection, caches, the engine's per-node memo
                send(side)
        for block in range(BLOCKS):
            order = list(conns) if block % 2 == 0 else list(reversed(conns))
            for side in order:
                samples[side].extend(send(side) for _ in range(PER_BLOCK))
    finally:
        for conn in conns.values():
            conn.close()
    assert not any(wrong.values()), f"answers other than hami-fast's first ones: {wrong}"
    return samples


def test_filter_vs_trivial_granian(benchmark, servers) -> None:
    ports, bodies, answers = servers
    samples = benchmark.pedantic(measure, args=(ports, bodies, answers), rounds=1, iterations=1)
    stats = {side: {"p50": percentile(s, 0.5) * 1e6, "p99": percentile(s, 0.99) * 1e6} for side, s in samples.items()}
    floor, ours = stats["trivial Granian"], stats["hami-fast /filter"]
    ratio = {q: ours[q] / floor[q] for q in ("p50", "p99")}
    others = {
        side: {q: s[q] / floor[q] for q in ("p50", "p99")}
        for side, s in stats.items()
        if side not in ("trivial Granian", "hami-fast /filter")
    }
    benchmark.extra_info.update(
        {f"{side} {q}_us": round(v, 1) for side, s in stats.items() for q, v in s.items()}
        | {f"ratio_{q}": round(r, 2) for q, r in ratio.items()}
    )
    n = BLOCKS * PER_BLOCK
    lines = [
        "",
        f"/filter over HTTP, {NODES} nodes x 8 GPUs, {NAMES} names in {LISTS} rotating windows (start +{STEP}"
        f" per request), concurrency 1, {n} requests per side in {BLOCKS} alternating blocks; request"
        f" {len(bodies[0])} B, answer {len(answers[0])} B",
        *(f"  {side:<18} p50 {s['p50']:7.0f} us   p99 {s['p99']:7.0f} us" for side, s in stats.items()),
        "  ratio              "
        + "   ".join(
            f"{q} {ratio[q]:.2f}x (target <= {TARGETS[q]}x: {'met' if ratio[q] <= TARGETS[q] else 'NOT met'})"
            for q in ("p50", "p99")
        ),
        *(f"  ratio of {side:<15} p50 {r['p50']:.2f}x   p99 {r['p99']:.2f}x" for side, r in others.items()),
    ]
    print("\n".join(lines))

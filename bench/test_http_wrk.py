"""HTTP serving measured from a separate load generator (wrk) against hami-fast in its own process.

Side by side in one run: Granian with the product's settings, Granian variants, and uvicorn (plain ASGI)
running the same handlers; /filter at concurrency 1 (kube-scheduler's pattern) on a 5,000-node
snapshot, /webhook at concurrency 32.
"""

from __future__ import annotations

import os
import re
import shutil
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

pytestmark = pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk not installed (apt-get install wrk)")
HERE = Path(__file__).resolve().parent
NODES = 5000


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("wrk")
    nodes, pods = build(NODES)
    (d / "cluster.json").write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": nodes + pods}))
    names = [f"n{i:05d}" for i in range(0, NODES, NODES // 500)]
    (d / "filter.json").write_bytes(
        orjson.dumps(
            {"Pod": gpu_pod("bench", namespace="bench", gpu=1, mem=1000, cores=5), "Nodes": None, "NodeNames": names}
        )
    )
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "object": gpu_pod("w", gpu=1)},
    }
    (d / "review.json").write_bytes(orjson.dumps(review))
    for name in ("filter", "review"):
        (d / f"{name}.lua").write_text(
            f'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
            f'local f = io.open("{d / (name + ".json")}", "rb")\nwrk.body = f:read("*a")\nf:close()\n'
        )
    return d


def start(cmd: list[str], port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent / "tests"), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"server did not start: {cmd}")


SERVERS = {
    "granian (product: auto HTTP, 1 runtime thread)": [],
    "granian HTTP/1.1 only": ["--http-mode", "1"],
    "granian 2 runtime threads": ["--runtime-threads", "2"],
    "uvicorn (ASGI, same handlers)": None,
}


def wrk(url: str, script: Path, connections: int, threads: int, seconds: int = 5) -> dict[str, float]:
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    unit = {"us": 1.0, "ms": 1000.0, "s": 1e6}

    def latency(pct: str) -> float:
        value, suffix = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M).groups()
        return float(value) * unit[suffix]

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "p50_us": latency("50"),
        "p99_us": latency("99"),
        "requests_per_s": rps,
        "non_2xx": float(errors.group(1)) if errors else 0.0,
    }


@pytest.mark.parametrize("server", list(SERVERS))
@pytest.mark.parametrize(("route", "connections", "threads"), [("/filter", 1, 1), ("/webhook", 32, 2)])
def test_http_server(benchmark, workdir: Path, server: str, route: str, connections: int, threads: int) -> None:
    port = free_port()
    flags = SERVERS[server]
    if flags is None:
        cmd = [sys.executable, str(HERE / "asgi_server.py"), str(workdir / "cluster.json"), str(port)]
    else:
        cmd = [
            sys.executable,
            "-m",
            "hami_fast.cli",
            "serve",
            "--snapshot",
            str(workdir / "cluster.json"),
            "--http_bind",
            f"127.0.0.1:{port}",
            "--metrics-bind-address",
            "",
            *flags,
        ]
    proc = start(cmd, port)
    try:
        script = workdir / ("filter.lua" if route == "/filter" else "review.lua")
        benchmark.group = f"{route} over HTTP, wrk -c{connections}"
        result = benchmark.pedantic(
            wrk, args=(f"http://127.0.0.1:{port}{route}", script, connections, threads), rounds=1, iterations=1
        )
    finally:
        proc.terminate()
        proc.wait(10)
    benchmark.extra_info.update(result)
    print(
        f"\n{server:<45} {route:<9} c={connections:<3} p50 {result['p50_us']:8.0f} us  p99 {result['p99_us']:8.0f} us  {result['requests_per_s']:9.0f} req/s"
    )
    assert result["non_2xx"] == 0

"""What the GPU map costs the API server with the page open, before and after the descheduler
watched the cluster instead of listing it. Not a test: an investigation tool whose figures are in
docs/benchmarks.md.

    python bench/tools/descheduler_api_load.py [--nodes 5000] [--pods-per-node 10] [--seconds 60]

Seeds the test API server with the cluster, runs `hami-fast descheduler` in this process against it,
polls `GET /api/v1/map` every 5 s (the page's refresh) for `--seconds` while pods come and go (one
created and one deleted per second), and counts the descheduler's API requests from the server's
log. "Before" is the read the descheduler made per refresh until now (its API re-listed at most
every 2 s, so every poll of the page): a LIST of every node and every pod, unpaged, parsed four
times (usage, fragmentation, two plans); both are measured on the same cluster with the same engine
functions.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
sys.path[:0] = [str(HERE), str(BENCH), str(BENCH.parent / "tests")]

import orjson  # noqa: E402
from clusters import build  # noqa: E402
from hami_fast import _native  # noqa: E402
from hami_fast.kube.client import KubeClient, load_api_client  # noqa: E402
from kubeapi.fixtures import start_kubeapi, stop_kubeapi  # noqa: E402
from test_descheduler_access import free_port  # noqa: E402

REFRESH = 5.0


def old_refresh(client: KubeClient) -> tuple[int, int, float]:
    """The read and the work of one map refresh before: (requests, bytes, seconds)."""
    t0 = time.perf_counter()
    inputs = [client.request("GET", path).data for path in ("/api/v1/nodes", "/api/v1/pods")]
    cluster = _native.Cluster(None)
    for blob in inputs:
        cluster.apply(blob)
    cluster.usage()
    _native.fragmentation(inputs, None)
    for objective in ("pending", "free-gpus"):
        _native.plan(inputs, orjson.dumps({"objective": objective, "max_moves": 10, "baseline": False}), None)
    return 2, sum(len(b) for b in inputs), time.perf_counter() - t0


def start_descheduler(kubeconfig: str) -> tuple[Any, int]:
    from hami_fast.descheduler.cli import Runtime, add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    port = free_port()
    args = parser.parse_args(["--bind", f"127.0.0.1:{port}", "--kubeconfig", kubeconfig, "--api-auth", "none"])
    runtime = Runtime(args)
    runtime.start()
    ready = threading.Event()
    threading.Thread(target=lambda: asyncio.run(runtime.serve(ready)), daemon=True).start()
    if not ready.wait(30):
        raise SystemExit("the descheduler did not start")
    return runtime, port


def churn(kubeapi: Any, pods: list[dict[str, Any]], stop: threading.Event) -> int:
    """One pod deleted and one created per second (the store's own writes: not in the request log)."""
    done = 0
    while not stop.wait(1.0):
        gone = pods[done % len(pods)]
        kubeapi.delete("pods", gone["metadata"]["name"], gone["metadata"]["namespace"])
        kubeapi.create(gone)
        done += 1
    return done


def get_map(port: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/map", timeout=120) as r:
        body = r.read()
    return time.perf_counter() - t0, len(body)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--pods-per-node", type=int, default=10)
    p.add_argument("--seconds", type=float, default=60.0)
    a = p.parse_args()
    nodes, pods = build(a.nodes, a.pods_per_node)
    with tempfile.TemporaryDirectory() as tmp:
        kubeapi = start_kubeapi(tmp)
        try:
            for obj in (*nodes, *pods):
                kubeapi.create(obj)
            client = KubeClient(load_api_client(kubeapi.kubeconfig), qps=0, burst=100, timeout=120)
            calls, size, seconds = old_refresh(client)
            per_minute = 60.0 / REFRESH
            print(f"cluster: {a.nodes} nodes, {len(pods)} pods")
            print(
                f"before: {calls} LISTs per refresh, {size / 1e6:.1f} MB; per minute with the page open: "
                f"{calls * per_minute:.0f} requests, {size * per_minute / 1e6:.0f} MB; one refresh {seconds:.2f} s"
            )
            kubeapi.clear_log()
            t_start = time.time()
            runtime, port = start_descheduler(kubeapi.kubeconfig)
            first, _ = get_map(port)
            startup = kubeapi.requests()
            kubeapi.clear_log()
            stop = threading.Event()
            churner = threading.Thread(target=churn, args=(kubeapi, pods, stop), daemon=True)
            churner.start()
            latencies, began = [], time.time()
            while time.time() - began < a.seconds:
                latency, body = get_map(port)
                latencies.append(latency)
                time.sleep(max(0.0, REFRESH - latency))
            stop.set()
            churner.join()
            window = time.time() - began
            during = kubeapi.requests()
            runtime.stop.set()
            kinds: dict[str, int] = {}
            for r in during:
                key = f"{r.verb or r.method} {r.resource}"
                kinds[key] = kinds.get(key, 0) + 1
            print(
                f"after: start-up {len(startup)} requests (the first LISTs and watches), first map "
                f"{first:.2f} s after {time.time() - t_start - window:.1f} s"
            )
            print(
                f"after: {len(during)} requests in {window:.0f} s with the page open and pods churning "
                f"({len(during) * 60 / window:.1f} per minute): {kinds}; map refresh p50 "
                f"{sorted(latencies)[len(latencies) // 2]:.3f} s, max {max(latencies):.3f} s, {body / 1e6:.1f} MB"
            )
        finally:
            stop_kubeapi(kubeapi)


if __name__ == "__main__":
    main()

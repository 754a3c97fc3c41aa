"""`hami-fast demo`: serve the demo cluster, schedule demo pods over HTTP, and tell what happened.

The server runs on this thread's event loop and the driver on a worker thread, so Granian is fully
stopped before the command returns (a server left running into interpreter exit could abort it).
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import sys
import threading
import time
from typing import Any

import orjson

from hami_fast import _native
from hami_fast.config import Config
from hami_fast.demo import story
from hami_fast.demo.cluster import demo_pods
from hami_fast.demo.driver import Driver, Outcome
from hami_fast.manifests import as_list_bytes
from hami_fast.server import logs
from hami_fast.server.serve import Runtime, build_runtime, run_http


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _drive(port: int, node_names: list[str], pods: list[dict[str, Any]]) -> tuple[list[Outcome], Driver]:
    driver = Driver("127.0.0.1", port)
    try:
        return [driver.schedule(pod, node_names) for pod in pods], driver
    finally:
        driver.close()


async def _serve_and_drive(runtime: Runtime, port: int, pods: list[dict[str, Any]]) -> tuple[list[Outcome], Driver]:
    ready = threading.Event()
    server = asyncio.create_task(run_http(runtime, ready))
    while not ready.is_set() and not server.done():
        await asyncio.sleep(0.005)
    if server.done():
        await server  # raises the listen error
        raise RuntimeError("hami-fast stopped before serving")
    node_names = sorted(n["name"] for n in orjson.loads(runtime.cluster.usage()))
    try:
        return await asyncio.to_thread(_drive, port, node_names, pods)
    finally:
        runtime.stop.set()
        await server


def run(args: Any) -> int:
    """Start hami-fast on the demo cluster, drive demo pods through /webhook, /filter and /bind, summarise."""
    logs.setup("warning")
    port = _free_port()
    runtime = build_runtime(Config(http_bind=f"127.0.0.1:{port}", metrics_bind_address="", demo=True))
    pods = demo_pods(args.pods, args.seed)
    outcomes, driver = asyncio.run(_serve_and_drive(runtime, port, pods))
    assert runtime.memory is not None
    print(
        f"hami-fast served the built-in demo cluster on http://127.0.0.1:{port} and scheduled {len(pods)} demo pods"
        " through /webhook -> /filter -> /bind over HTTP, as kube-apiserver and kube-scheduler would."
    )
    if args.verbose:
        print()
        for line in story.raw_lines(outcomes, runtime.memory, runtime.cluster, int(time.time())):
            print(line)
    usage = orjson.loads(runtime.cluster.usage())
    objects = [*runtime.memory.nodes.values(), *runtime.memory.pods.values()]
    fragmentation = orjson.loads(_native.fragmentation([as_list_bytes(objects)]))
    sections = [
        story.cluster_line(usage),
        story.by_kind(outcomes),
        story.utilisation(usage, fragmentation["cluster"]),
        story.pending_explained(runtime.cluster, outcomes, int(time.time())),
        story.latency(driver.latency, statistics.median),
        story.next_steps(sys.argv[0]),
    ]
    print("\n\n".join(s for s in sections if s))
    return 0 if all(o.status != "denied" for o in outcomes) else 1

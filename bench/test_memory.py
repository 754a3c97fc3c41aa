"""Resident memory of the engine's cache per device and per pod, measured in a fresh process (RSS delta)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROBE = textwrap.dedent(
    """
    import gc, sys, orjson
    sys.path.insert(0, {bench!r}); sys.path.insert(0, {tests!r})
    from clusters import build
    from hami_fast._native import Cluster

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    nodes, pods = build(20000)
    node_bytes = orjson.dumps({{"kind": "List", "items": nodes}})
    pod_bytes = orjson.dumps({{"kind": "List", "items": pods}})
    del nodes, pods; gc.collect()
    cluster = Cluster()
    before = rss(); cluster.apply(node_bytes); after_nodes = rss(); cluster.apply(pod_bytes); after_pods = rss()
    print(after_nodes - before, after_pods - after_nodes, cluster.node_count(), cluster.pod_count())
    """
)


@pytest.mark.benchmark(group="memory")
def test_resident_memory_per_device_and_pod(benchmark) -> None:
    here = Path(__file__).resolve().parent
    code = PROBE.format(bench=str(here), tests=str(here.parent / "tests"))

    def measure() -> list[int]:
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
        return [int(x) for x in out.split()]

    node_delta, pod_delta, nodes, pods = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info["bytes_per_device"] = node_delta / (nodes * 8)
    benchmark.extra_info["bytes_per_pod"] = pod_delta / pods
    print(
        f"engine cache: {node_delta / (nodes * 8):.0f} bytes per device, {pod_delta / pods:.0f} bytes per pod ({nodes} nodes, {pods} pods)"
    )
    assert nodes == 20000 and pods == 200000

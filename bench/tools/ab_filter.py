"""Filter latency of two builds of the engine module, one process per build and case, so that
they can be run alternately on a busy machine (pytest-benchmark runs one build at a time):

    cp python/hami_fast/_native.abi3.so /tmp/before.so   # on the old commit, after make install
    for so in /tmp/before.so python/hami_fast/_native.abi3.so; do
        .venv/bin/python bench/tools/ab_filter.py $so 5000 500 fgd-balance; done

Arguments: the module file, nodes, candidate names, node policy (`default`: the configured one).
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000


def load(so: str) -> None:
    """Makes `hami_fast._native` the module built into `so`, before the bench helpers import it."""
    spec = importlib.util.spec_from_file_location("hami_fast._native", so)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["hami_fast._native"] = module
    sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]


def body(node_objs: list, names: int, policy: str) -> bytes:
    from k8s_objects import gpu_pod

    pod = gpu_pod("incoming", namespace="bench", gpu=1, mem=12000, cores=25)
    if policy != "default":
        pod["metadata"].setdefault("annotations", {})["hami.io/node-scheduler-policy"] = policy
    listed = [n["metadata"]["name"] for n in node_objs][:: max(1, len(node_objs) // names)][:names]
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": listed})


def main(so: str, nodes: int, names: int, policy: str) -> None:
    load(so)
    from clusters import build, engine_with

    node_objs, pods = build(nodes)
    engine = engine_with(node_objs, pods)
    request = body(node_objs, names, policy)
    for _ in range(50):
        engine.decide(request, NOW, False)
    times = []
    for _ in range(3000 if policy == "default" else 300):
        start = time.perf_counter()
        engine.decide(request, NOW, False)
        times.append(time.perf_counter() - start)
    median, low = statistics.median(times) * 1e6, min(times) * 1e6
    print(f"{Path(so).name:28s} {nodes}x{names} {policy:12s} median {median:8.2f} us  min {low:8.2f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])

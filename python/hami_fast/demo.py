"""The built-in demo cluster: GPU nodes as HAMi's device plugin registers them, and a stream of demo pods."""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter
from typing import Any

import orjson

from hami_fast._native import Cluster

GPU_MODELS = [
    ("NVIDIA A100-SXM4-80GB", 81920, 8),
    ("NVIDIA-Tesla V100-PCIE-32GB", 32768, 4),
    ("NVIDIA-Tesla T4", 15360, 2),
]


def demo_node(i: int, rng: random.Random) -> dict[str, Any]:
    model, memory, gpus = GPU_MODELS[i % len(GPU_MODELS)]
    name = f"demo-gpu-{i:03d}"
    devices = [
        {
            "id": f"GPU-{i:04d}{g:04d}-demo",
            **({"index": g} if g else {}),
            "count": 10,
            "devmem": memory,
            "devcore": 100,
            "type": model,
            **({"numa": g * 2 // gpus} if g * 2 // gpus else {}),
            "mode": "hami-core",
            "health": True,
        }
        for g in range(gpus)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"gpu": "on"},
            "annotations": {"hami.io/node-nvidia-register": orjson.dumps(devices).decode()},
        },
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus * 10), "cpu": "96", "memory": "768Gi"}},
    }


def demo_nodes(count: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [demo_node(i, rng) for i in range(count)]


def demo_pod(i: int, rng: random.Random) -> dict[str, Any]:
    shape = rng.choice(["share-small", "share-small", "share-mid", "whole", "percent", "multi"])
    limits: dict[str, Any] = {
        "share-small": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(rng.choice([1024, 2048, 4096])), "nvidia.com/gpucores": str(rng.choice([10, 20, 30]))},
        "share-mid": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(rng.choice([8192, 12288])), "nvidia.com/gpucores": "50"},
        "whole": {"nvidia.com/gpu": "1"},
        "percent": {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": str(rng.choice([25, 50]))},
        "multi": {"nvidia.com/gpu": str(rng.choice([2, 4])), "nvidia.com/gpumem": "8192", "nvidia.com/gpucores": "40"},
    }[shape]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"demo-{shape}-{i:04d}", "namespace": "demo", "uid": f"demo-uid-{i:06d}", "labels": {"app": "demo"}},
        "spec": {"schedulerName": "hami-scheduler", "containers": [{"name": "main", "image": "cuda:12", "resources": {"limits": limits}}]},
    }


def demo_pods(count: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed + 1)
    return [demo_pod(i, rng) for i in range(count)]


def run(args: Any) -> int:
    """Filter every demo pod through the engine, as the extender does, and report where they went."""
    cluster = Cluster()
    nodes = demo_nodes(args.nodes, args.seed)
    for node in nodes:
        cluster.apply(orjson.dumps(node))
    names = [n["metadata"]["name"] for n in nodes]
    placed: Counter[str] = Counter()
    latencies: list[float] = []
    failed = 0
    for pod in demo_pods(args.pods, args.seed):
        body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
        start = time.perf_counter()
        response, decision = cluster.filter(body, int(time.time()))
        latencies.append(time.perf_counter() - start)
        result = orjson.loads(response)
        if result["NodeNames"]:
            node = result["NodeNames"][0]
            placed[node] += 1
            print(f"{pod['metadata']['name']:<24} -> {node}  {orjson.loads(decision)['annotations']['hami.io/vgpu-devices-allocated']}")
        else:
            failed += 1
            print(f"{pod['metadata']['name']:<24} -> Pending: {len(result['FailedNodes'] or {})} nodes do not fit")
    latencies.sort()
    p99 = latencies[int(0.99 * (len(latencies) - 1))]
    print(
        f"\n{len(latencies)} pods over {len(names)} nodes: {len(latencies) - failed} placed on {len(placed)} nodes, {failed} pending; "
        f"filter latency median {statistics.median(latencies) * 1e6:.0f} us, p99 {p99 * 1e6:.0f} us"
    )
    return 0

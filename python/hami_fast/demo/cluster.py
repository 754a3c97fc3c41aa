"""The built-in demo cluster: GPU nodes as HAMi's device plugin registers them, and a stream of demo pods.

Pure data: `hami-fast serve` (no cluster) and the demo driver both import it; it imports neither.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

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


KINDS = ["share-small", "share-mid", "whole", "percent", "multi", "large"]
LARGE_EVERY = 25  # every 25th pod asks for 8 nearly whole A100s (a whole node): some of them find no node


def pod_kind(name: str) -> str:
    """`demo-share-small-0001` -> `share-small`."""
    return name.removeprefix("demo-").rsplit("-", 1)[0]


def demo_pod(i: int, rng: random.Random) -> dict[str, Any]:
    shape = rng.choice(["share-small", "share-small", "share-mid", "whole", "percent", "multi"])
    if i % LARGE_EVERY == LARGE_EVERY - 1:
        shape = "large"
    limits: dict[str, Any] = {
        "share-small": {
            "nvidia.com/gpu": "1",
            "nvidia.com/gpumem": str(rng.choice([1024, 2048, 4096])),
            "nvidia.com/gpucores": str(rng.choice([10, 20, 30])),
        },
        "share-mid": {
            "nvidia.com/gpu": "1",
            "nvidia.com/gpumem": str(rng.choice([8192, 12288])),
            "nvidia.com/gpucores": "50",
        },
        "whole": {"nvidia.com/gpu": "1"},
        "percent": {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": str(rng.choice([25, 50]))},
        "multi": {"nvidia.com/gpu": str(rng.choice([2, 4])), "nvidia.com/gpumem": "8192", "nvidia.com/gpucores": "40"},
        "large": {"nvidia.com/gpu": "8", "nvidia.com/gpumem": "65536", "nvidia.com/gpucores": "60"},
    }[shape]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"demo-{shape}-{i:04d}",
            "namespace": "demo",
            "uid": f"demo-uid-{i:06d}",
            "labels": {"app": "demo"},
        },
        "spec": {
            "schedulerName": "hami-scheduler",
            "containers": [{"name": "main", "image": "cuda:12", "resources": {"limits": limits}}],
        },
    }


def demo_pods(count: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed + 1)
    return [demo_pod(i, rng) for i in range(count)]

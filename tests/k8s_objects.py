"""Small builders of Kubernetes objects as HAMi's device plugin and users leave them."""

from __future__ import annotations

from typing import Any

import orjson

T4 = "NVIDIA-Tesla T4"


def gpu_node(name: str, gpus: int = 2, memory: int = 16384, count: int = 10, model: str = T4) -> dict[str, Any]:
    devices = [
        {
            "id": f"GPU-{name}-{g}",
            **({"index": g} if g else {}),
            "count": count,
            "devmem": memory,
            "devcore": 100,
            "type": model,
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
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus * count), "cpu": "32", "memory": "128Gi"}},
    }


def gpu_pod(name: str, namespace: str = "default", **limits: Any) -> dict[str, Any]:
    resource = {
        "gpu": "nvidia.com/gpu",
        "mem": "nvidia.com/gpumem",
        "cores": "nvidia.com/gpucores",
        "pct": "nvidia.com/gpumem-percentage",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}", "labels": {"app": "t"}},
        "spec": {
            "schedulerName": "hami-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": "cuda",
                    "resources": {"limits": {resource[k]: str(v) for k, v in limits.items()}},
                }
            ],
        },
        "status": {"phase": "Pending"},
    }


def filter_args(pod: dict[str, Any], nodes: list[str]) -> dict[str, Any]:
    return {"Pod": pod, "Nodes": None, "NodeNames": nodes}


def bind_args(pod: dict[str, Any], node: str) -> dict[str, Any]:
    meta = pod["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}

"""Synthetic clusters for benchmarks: nodes as the device plugin registers them, ~10 resident pods per node."""

from __future__ import annotations

from typing import Any

import orjson
from hami_fast._native import Cluster
from k8s_objects import gpu_node


def resident_pod(node: str, j: int, gpus: int) -> dict[str, Any]:
    device = f"GPU-{node}-{j % gpus}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{node}-run-{j}",
            "namespace": f"ns{j % 7}",
            "uid": f"uid-{node}-{j}",
            "annotations": {
                "hami.io/vgpu-node": node,
                "hami.io/vgpu-time": "1700000000",
                "hami.io/vgpu-devices-to-allocate": ";",
                "hami.io/vgpu-devices-allocated": f"{device},NVIDIA,{4096 * (1 + j % 3)},{10 * (1 + j % 3)}:;",
            },
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "hami-scheduler",
            "containers": [{"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }


def build(nodes: int, pods_per_node: int = 10, gpus: int = 8) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    node_objs = [
        gpu_node(f"n{i:05d}", gpus=gpus, memory=81920, count=10, model="NVIDIA A100-SXM4-80GB") for i in range(nodes)
    ]
    pods = [resident_pod(n["metadata"]["name"], j, gpus) for n in node_objs for j in range(pods_per_node)]
    return node_objs, pods


def engine_with(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Cluster:
    cluster = Cluster()
    cluster.apply(orjson.dumps({"kind": "List", "items": nodes}))
    cluster.apply(orjson.dumps({"kind": "List", "items": pods}))
    return cluster

"""Synthetic clusters for benchmarks: nodes as the device plugin registers them, pods placed by the engine."""

from __future__ import annotations

import random
from typing import Any

import orjson

from hami_fast._native import Cluster
from k8s_objects import gpu_node, gpu_pod


def build(nodes: int, pods: int, gpus: int = 8, seed: int = 1) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`nodes` 8-GPU nodes and `pods` running pods, placed by the engine so the usage is realistic."""
    rng = random.Random(seed)
    node_objs = [gpu_node(f"n{i:05d}", gpus=gpus, memory=81920, count=10, model="NVIDIA A100-SXM4-80GB") for i in range(nodes)]
    cluster = Cluster()
    cluster.apply(orjson.dumps({"kind": "List", "items": node_objs}))
    names = [n["metadata"]["name"] for n in node_objs]
    placed: list[dict[str, Any]] = []
    for i in range(pods):
        pod = gpu_pod(f"run-{i}", namespace=f"ns{i % 7}", gpu=rng.choice([1, 1, 1, 2]), mem=rng.choice([4096, 8192, 16384]), cores=rng.choice([10, 20, 30]))
        candidates = rng.sample(names, min(20, len(names)))
        _, decision = cluster.filter(orjson.dumps({"Pod": pod, "NodeNames": candidates}), 1_700_000_000)
        if decision and (d := orjson.loads(decision))["node"]:
            pod["metadata"]["annotations"] = d["annotations"]
            pod["spec"]["nodeName"] = d["node"]
            pod["status"] = {"phase": "Running"}
            placed.append(pod)
    return node_objs, placed


def engine_with(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Cluster:
    cluster = Cluster()
    cluster.apply(orjson.dumps({"kind": "List", "items": nodes + pods}))
    return cluster

"""Filter on another vendor's nodes against NVIDIA's, side by side in one run.

The same cluster shape for both: 2,000 nodes x 8 devices with 10 resident pods each, one as the
NVIDIA plugin registers it (JSON annotation) and one as Hygon's DCU plugin does (HAMi's colon
form). kube-scheduler sends 500 candidates and rotates where its list starts, so every call here
names another list (50 in rotation). The NVIDIA pod goes the engine's kept-order path; the DCU pod
HAMi's generic per-node walk.
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest
from clusters import build, engine_with

NOW = 1_800_000_000
NODES, NAMES, LISTS = 2000, 500, 50


def dcu_node(name: str, devices: int = 8) -> dict[str, Any]:
    register = ":".join(f"DCU-{name}-{i},10,65536,100,DCU-Z100L,0,true" for i in range(devices)) + ":"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"hami.io/node-dcu-register": register}},
        "status": {"allocatable": {"hygon.com/dcunum": str(devices * 10)}},
    }


def dcu_resident(node: str, j: int, devices: int = 8) -> dict[str, Any]:
    value = f"DCU-{node}-{j % devices},DCU,{4096 * (1 + j % 3)},{10 * (1 + j % 3)}:;"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{node}-run-{j}",
            "namespace": f"ns{j % 7}",
            "uid": f"uid-{node}-{j}",
            "annotations": {"hami.io/vgpu-node": node, "hami.io/dcu-devices-allocated": value},
        },
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x"}]},
        "status": {"phase": "Running"},
    }


def pod(limits: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "incoming", "namespace": "bench", "uid": "uid-incoming"},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}]},
    }


def rotating_bodies(names: list[str], incoming: dict[str, Any]) -> list[bytes]:
    step = len(names) // LISTS
    lists = [(names[k * step :] + names[: k * step])[:: len(names) // NAMES][:NAMES] for k in range(LISTS)]
    return [orjson.dumps({"Pod": incoming, "Nodes": None, "NodeNames": names}) for names in lists]


@pytest.fixture(scope="module")
def clusters() -> dict[str, tuple[Any, list[bytes]]]:
    nvidia_nodes, nvidia_pods = build(NODES, pods_per_node=10, gpus=8)
    dcu_nodes = [dcu_node(f"d{i:05d}") for i in range(NODES)]
    dcu_pods = [dcu_resident(n["metadata"]["name"], j) for n in dcu_nodes for j in range(10)]
    nvidia = engine_with(nvidia_nodes, nvidia_pods)
    dcu = engine_with(dcu_nodes, dcu_pods)
    nvidia_request = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "12000", "nvidia.com/gpucores": "25"}
    dcu_request = {"hygon.com/dcunum": "1", "hygon.com/dcumem": "12000", "hygon.com/dcucores": "25"}
    return {
        "nvidia": (nvidia, rotating_bodies([n["metadata"]["name"] for n in nvidia_nodes], pod(nvidia_request))),
        "dcu": (dcu, rotating_bodies([n["metadata"]["name"] for n in dcu_nodes], pod(dcu_request))),
    }


@pytest.mark.parametrize("vendor", ["nvidia", "dcu"])
def test_filter_rotating_candidates(benchmark, clusters, vendor: str) -> None:
    cluster, bodies = clusters[vendor]
    benchmark.group = f"filter {NODES} nodes x 8 devices, {NAMES} rotating candidates"
    calls = itertools.cycle(bodies)
    decision = benchmark(lambda: cluster.decide(next(calls), NOW, False))
    assert decision.outcome == "scheduled", decision

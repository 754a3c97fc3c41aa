"""Minimal cases of the differences the random suite found, each checked against HAMi case by case.

Each entry is a case as `strategies.cases` draws it (items, pod, node_policy, gpu_policy). The name
says what HAMi does there; docs/compatibility.md explains the code path behind it.
"""

from __future__ import annotations

import json
from typing import Any

A100, V100 = ("NVIDIA-A100-SXM4-80GB", 81920), ("NVIDIA-Tesla V100-PCIE-32GB", 32768)
# A device registered with the vendor word itself as its type: HAMi then pads GPU-less containers.
BARE = ("NVIDIA", 16384)


def gpu(
    node: str, i: int, model: tuple[str, int], *, health: bool = True, index: int | None = None, numa: int = 0
) -> dict[str, Any]:
    kind, memory = model
    return {
        "id": f"GPU-{node}-{i}",
        "index": i if index is None else index,
        "count": 10,
        "devmem": memory,
        "devcore": 100,
        "type": kind,
        "mode": "hami-core",
        "health": health,
        "numa": numa,
    }


def node(name: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    register = json.dumps(devices, separators=(",", ":"))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"hami.io/node-nvidia-register": register}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": str(10 * len(devices))}},
    }


def memory_quota(mib: int, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": namespace},
        "spec": {"hard": {"limits.nvidia.com/gpumem": str(mib)}},
    }


def container(name: str, limits: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "image": "x", "resources": {"limits": limits}} if limits else {"name": name, "image": "x"}


def pod(
    init: list[dict[str, str]],
    app: list[dict[str, str]],
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container(f"c{i}", lim) for i, lim in enumerate(app)]}
    if init:
        spec["initContainers"] = [container(f"init{i}", lim) for i, lim in enumerate(init)]
    metadata: dict[str, Any] = {"name": "new", "namespace": namespace, "uid": "uid-new"}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def resident(name: str, on: str, devices: str) -> dict[str, Any]:
    annotations = {"hami.io/vgpu-node": on, "hami.io/vgpu-devices-allocated": devices}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations},
        "spec": {"nodeName": on, "containers": [container("c", {"nvidia.com/gpu": "1"})]},
        "status": {"phase": "Running"},
    }


def case(items: list[dict[str, Any]], new: dict[str, Any], gpu_policy: str = "binpack") -> dict[str, Any]:
    return {"items": items, "pod": new, "node_policy": "binpack", "gpu_policy": gpu_policy}


QUARTER = {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "25"}  # no gpumem: the webhook sees 0 MiB

# HAMi's fitQuota collapses the app containers placed so far with the pod's init-container count,
# but during the app phase its list holds app containers only, from index 0: the first app
# containers count as init containers (their peak, not their sum), and init containers not at all.
FOUND: dict[str, dict[str, Any]] = {
    # A failure CI found: two app containers on one card count once against the quota.
    "quota-first-app-container-counts-as-init": case(
        [node("node-a", [gpu("node-a", 0, A100)]), memory_quota(30000)], pod([{}], [QUARTER, QUARTER])
    ),
    # The init container's card is left out of the app containers' quota, which changes the card.
    "quota-leaves-init-containers-out-of-app-phase": case(
        [node("node-a", [gpu("node-a", 0, A100), gpu("node-a", 1, V100)]), memory_quota(50000)],
        pod(
            [{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "40000"}],
            [{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000"}],
        ),
    ),
    # Without padding a GPU-less app container takes no index: c1 is at index 0, an "init" container.
    "quota-unpadded-gpu-less-app-container-takes-no-index": case(
        [node("node-a", [gpu("node-a", 0, V100, health=False), gpu("node-a", 1, A100)]), memory_quota(30000)],
        pod([{}], [{}, QUARTER, QUARTER]),
    ),
    # With padding (a device typed `NVIDIA`) it does: c1 and c2 are app containers and add up.
    "quota-padded-gpu-less-app-container-takes-an-index": case(
        [node("node-a", [gpu("node-a", 0, BARE, health=False), gpu("node-a", 1, A100)]), memory_quota(30000)],
        pod([{}], [{}, QUARTER, QUARTER]),
    ),
    # Beyond 12 devices Go's sort.Sort is a pattern-defeating quicksort: the 13 equal idle cards
    # come out in its order, not in registration order, and Fit takes the last ones.
    "more-than-12-devices-sorted-as-go-sorts": case(
        [
            node("node-a", [gpu("node-a", i, A100) for i in range(15)]),
            resident("r0", "node-a", "GPU-node-a-4,NVIDIA,1000,10:;"),
            resident("r1", "node-a", "GPU-node-a-12,NVIDIA,2000,10:;"),
        ],
        pod([], [{"nvidia.com/gpu": "3", "nvidia.com/gpumem": "1000"}]),
    ),
    # Oracle seed 2004. hami_fast's own node policies (here fgd, by pod annotation) order the
    # chosen node's GPUs their way; under numa-bind Fit starts over at each change of NUMA node and
    # topology-aware keeps only the last run, so that order must keep HAMi's NUMA runs: taken as
    # it stood it split the NUMA-0 cards around the NUMA-1 one and the node HAMi fits failed.
    "own-node-policy-keeps-hami-s-numa-runs": case(
        [node("node-0", [gpu("node-0", i, A100, index=min(i, 4), numa=int(i == 2)) for i in range(6)])],
        pod(
            [],
            [{"nvidia.com/gpu": "3", "nvidia.com/gpumem": "2e3"}],
            annotations={
                "hami.io/node-scheduler-policy": "fgd",
                "nvidia.com/numa-bind": "1",
                "nvidia.com/nouse-gpuuuid": "GPU-node-0-4",
            },
        ),
        gpu_policy="topology-aware",
    ),
    # An own node policy's GPU order that meets the quota early (the A100's half first): HAMi's
    # order fits the two V100 halves, so the node fits, on HAMi's cards.
    "own-node-policy-falls-back-to-hami-s-order": case(
        [node("node-0", [gpu("node-0", 0, A100), gpu("node-0", 1, V100), gpu("node-0", 2, V100)]), memory_quota(50000)],
        pod(
            [],
            [{"nvidia.com/gpu": "2", "nvidia.com/gpumem-percentage": "50"}],
            annotations={"hami.io/node-scheduler-policy": "bestfit"},
        ),
        gpu_policy="spread",
    ),
}

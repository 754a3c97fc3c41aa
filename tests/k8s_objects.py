"""The tests' one builder of Kubernetes objects, as HAMi's device plugin and users leave them: nodes
with registered devices, pods asking for or holding GPUs, Filter and Bind arguments."""

from __future__ import annotations

from typing import Any

import orjson

T4 = "NVIDIA-Tesla T4"

# Device ids as HAMi v2.10's NVIDIA device plugin registers them (`DeviceInfo.ID` is the driver's
# UUID, as NVML reports it), and as test clusters name them.
GPU_IDS_HAMI_REGISTERS = [
    "GPU-e290caca-2f0c-9582-acab-67a142b61ffa",
    "MIG-4f8b2a9e-7c1d-5e3f-a0b6-2d9c8e1f7a35",
    "MIG-GPU-e290caca-2f0c-9582-acab-67a142b61ffa/7/0",  # drivers before R470
    "GPU-node-0-2",
    "GPU-a100-cafe-1",
    "card3",
    "gpu-1",
]
# What would split `hami.io/vgpu-devices-allocated` (`uuid,type,mem,cores:` per device, `;` per
# container), `nvidia.com/use-gpuuuid` (comma list) or `hami-fast.io/reservation`, whose GPUs are trimmed.
GPU_IDS_THAT_BREAK_ANNOTATIONS = [
    "",
    "GPU-a,GPU-b",
    "GPU-a:1",
    "GPU-a;",
    "GPU a",
    " GPU-a",
    "GPU-a\t",
    "GPU-a\n",
    "GPU-\na",
    "GPU-\x00",
    "GPU-\x7f",
]


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


def nvidia_register(
    node: str, gpus: int = 2, mem: int = 16000, model: str = "NVIDIA-A10", unhealthy: tuple[int, ...] = ()
) -> str:
    """HAMi's `hami.io/node-nvidia-register` of `gpus` cards `GPU-<node>-<i>`: 10 slots, 100 % cores each."""
    devices = [
        {
            "id": f"GPU-{node}-{i}",
            "index": i,
            "count": 10,
            "devmem": mem,
            "devcore": 100,
            "type": model,
            "health": i not in unhealthy,
        }
        for i in range(gpus)
    ]
    return orjson.dumps(devices).decode()


def registered_node(
    name: str, gpus: int = 2, mem: int = 16000, model: str = "NVIDIA-A10", unhealthy: tuple[int, ...] = ()
) -> dict[str, Any]:
    """A node whose device plugin registered `nvidia_register`'s cards (none: no annotation)."""
    annotations = {"hami.io/node-nvidia-register": nvidia_register(name, gpus, mem, model, unhealthy)} if gpus else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations}}


def v100_node(name: str) -> dict[str, Any]:
    """A node with two 32 GB V100s, `GPU-<last letter of name><i>`."""
    p = name[-1]
    devices = [
        {
            "id": f"GPU-{p}{i}",
            "index": i,
            "count": 10,
            "devmem": 32768,
            "devcore": 100,
            "type": "NVIDIA-Tesla V100-PCIE-32GB",
            "health": True,
        }
        for i in range(2)
    ]
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": name, "annotations": {"hami.io/node-nvidia-register": orjson.dumps(devices).decode()}},
    }


def node_with_devices(name: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    """A node registering exactly `devices` (HAMi's register annotation), allocatable their counts."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"hami.io/node-nvidia-register": orjson.dumps(devices).decode()}},
        "status": {"allocatable": {"nvidia.com/gpu": str(sum(d["count"] for d in devices))}},
    }


def node_with(
    name: str,
    annotations: dict[str, str] | None = None,
    capacity: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A node of `annotations` (a device plugin's registration), `capacity` also its allocatable."""
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    meta["annotations"] = annotations or {}
    node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": meta}
    if capacity is not None:
        node["status"] = {"capacity": capacity, "allocatable": capacity}
    return node


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


def pending_pod(name: str = "big", gpus: int = 1, mem: int = 16000) -> dict[str, Any]:
    """A pending pod of namespace `team` asking `gpus` GPUs of `mem` MiB each."""
    limits = {"nvidia.com/gpu": str(gpus), "nvidia.com/gpumem": str(mem)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "uid": f"u-{name}"},
        "spec": {"schedulerName": "hami-scheduler", "containers": [{"name": "c", "resources": {"limits": limits}}]},
        "status": {"phase": "Pending"},
    }


def vgpu_pod(name: str, mem: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod asking one GPU of `mem` MiB."""
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(mem)}
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]},
    }


def holding_pod(name: str, node: str = "node-0", gpu: int = 0, mem: int = 16384) -> dict[str, Any]:
    """`gpu_pod` bound to `node` and running, holding `mem` of GPU `gpu` (HAMi's annotations)."""
    pod = gpu_pod(name, gpu=1, mem=mem)
    pod["metadata"]["annotations"] = {
        "hami.io/vgpu-node": node,
        "hami.io/vgpu-devices-allocated": f"GPU-{node}-{gpu},NVIDIA,{mem},0:;",
    }
    pod["spec"]["nodeName"] = node
    pod["status"] = {"phase": "Running"}
    return pod


def replica_pod(
    name: str,
    node: str | None,
    gpu: int = 0,
    mem: int = 4000,
    cores: int = 20,
    *,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    owner: str | None = "rs",
    owner_uid: str = "rs-1",
    bind_phase: bool = True,
    scheduler: str | None = "hami-scheduler",
) -> dict[str, Any]:
    """A pod of ReplicaSet `owner` (None: a bare pod) asking one GPU, `mem` MiB and `cores` % of it.
    With a `node` it runs there holding GPU `gpu` (HAMi's annotations, `bind-phase` success unless
    `bind_phase` is False); without, it is pending."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"u-{name}"}
    if labels is not None:
        meta["labels"] = labels
    meta["annotations"] = {}
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": owner_uid, "controller": True}
        ]
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(mem), "nvidia.com/gpucores": str(cores)}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"limits": limits}}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    if node:
        meta["annotations"] = {
            "hami.io/vgpu-node": node,
            "hami.io/vgpu-devices-allocated": f"GPU-{node}-{gpu},NVIDIA,{mem},{cores}:;",
        }
        if bind_phase:
            meta["annotations"]["hami.io/bind-phase"] = "success"
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def limits_pod(
    limits: dict[str, str], annotations: dict[str, str] | None = None, name: str = "p", uid: str | None = None
) -> dict[str, Any]:
    """A pod of one container asking `limits` (a vendor's resource names)."""
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]},
    }


def resident_pod(name: str, node: str, annotations: dict[str, str]) -> dict[str, Any]:
    """A running pod bound to `node` holding devices by its allocation `annotations` (HAMi's
    `hami.io/vgpu-node` added): how the engine sees another scheduler's or an earlier placement."""
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    meta["annotations"] = {"hami.io/vgpu-node": node, **annotations}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running"},
    }


def asking_pod(
    *asks: dict[str, str], where: str = "limits", annotations: dict[str, str] | None = None, name: str = "p"
) -> dict[str, Any]:
    """A pending pod, one container per ask (resource: quantity) under `where` (limits or requests)."""
    containers = [{"name": f"c{i}", "image": "x", "resources": {where: a}} for i, a in enumerate(asks)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations or {}},
        "spec": {"containers": containers},
    }


def filter_args(pod: dict[str, Any], nodes: list[str]) -> dict[str, Any]:
    return {"Pod": pod, "Nodes": None, "NodeNames": nodes}


def bind_args(pod: dict[str, Any], node: str) -> dict[str, Any]:
    meta = pod["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}


def explain_on(
    items: list[dict[str, Any]], pod: dict[str, Any], now: int = 0, node_policy: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The engine's `explain` of `pod` on a fresh cluster of `items`, with the ingest errors."""
    from hami_fast import _native

    cluster = _native.Cluster()
    _, _, _, errors = cluster.apply_list_page(orjson.dumps({"kind": "List", "items": items}))
    return explained(cluster, orjson.dumps(pod), now, node_policy), errors


def explained(
    cluster: Any, pod: bytes, now: int, node_policy: str | None = None, gpu_policy: str | None = None
) -> dict[str, Any]:
    """The engine's `explain` as `--output json` writes it, an `error` key included (the oracles' shape)."""
    from hami_fast.explain import document

    return document(cluster, pod, node_policy, gpu_policy, now)

"""Builders for the Kubernetes objects the tests feed to the oracle and the engine."""

import json


def gpu(
    uuid,
    *,
    index=0,
    count=10,
    devmem=32768,
    devcore=100,
    type="NVIDIA-Tesla V100-PCIE-32GB",
    numa=0,
    mode="hami-core",
    health=True,
):
    """One device of ``hami.io/node-nvidia-register`` (§3.2), zero values omitted like the plugin."""
    device = {
        "id": uuid,
        "index": index,
        "count": count,
        "devmem": devmem,
        "devcore": devcore,
        "type": type,
        "numa": numa,
        "mode": mode,
        "health": health,
    }
    return {key: value for key, value in device.items() if value not in (0, "", False)}


def node(name, devices=None, *, annotations=None, register=None):
    """A Node; ``devices`` are :func:`gpu` dicts, ``register`` overrides the raw annotation."""
    annos = dict(annotations or {})
    if register is not None:
        annos["hami.io/node-nvidia-register"] = register
    elif devices is not None:
        annos["hami.io/node-nvidia-register"] = json.dumps(devices, separators=(",", ":"))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-node-{name}", "annotations": annos},
        "status": {"allocatable": {"nvidia.com/gpu": str(10 * len(devices or []))}},
    }


def container(name, limits=None, requests=None):
    resources = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {"name": name, "image": "busybox", "resources": resources}


def pod(
    name,
    containers,
    *,
    init_containers=None,
    namespace="default",
    uid=None,
    annotations=None,
    phase=None,
    init_statuses=None,
):
    """A Pod. ``init_statuses`` = list of exit codes (None = still running) per init container."""
    spec = {"containers": containers, "schedulerName": "hami-scheduler"}
    if init_containers:
        spec["initContainers"] = init_containers
    status = {}
    if phase is not None:
        status["phase"] = phase
    if init_statuses is not None:
        status["initContainerStatuses"] = [
            _init_status(c["name"], code) for c, code in zip(init_containers or [], init_statuses)
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{namespace}-{name}",
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
        "status": status,
    }


def _init_status(name, exit_code):
    if exit_code is None:
        state = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    else:
        state = {"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}}
    return {"name": name, "ready": False, "restartCount": 0, "image": "busybox", "imageID": "", "state": state}


def placed_pod(name, node_name, allocated, containers, **kwargs):
    """A pod HAMi already placed: annotated with ``hami.io/vgpu-node`` and the device list."""
    annotations = dict(kwargs.pop("annotations", None) or {})
    annotations.update(
        {
            "hami.io/vgpu-node": node_name,
            "hami.io/vgpu-time": "1700000000",
            "hami.io/vgpu-devices-to-allocate": allocated,
            "hami.io/vgpu-devices-allocated": allocated,
        }
    )
    return pod(name, containers, annotations=annotations, **kwargs)


def quota(name, namespace, hard):
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-quota-{namespace}-{name}"},
        "spec": {"hard": hard},
    }

"""Hypothesis strategies for clusters and pods as HAMi v2.10 sees them.

A case is one cluster snapshot (Nodes, resident Pods, ResourceQuotas), one pod as a user submits
it, and the command-line policies. Everything is drawn small (1-4 nodes, mostly up to 4 GPUs, now and
then up to 20, past the 12 where Go's sort stops being an insertion sort) so that ties, near-ties
and shared cards are common, and each case costs one call of HAMi's oracle.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

# The model strings a device plugin registers; "NVIDIA" alone is the vendor word itself, which
# changes HAMi's device score and its slot padding.
MODELS = {
    "NVIDIA-Tesla V100-PCIE-32GB": 32768,
    "NVIDIA-A100-SXM4-80GB": 81920,
    "NVIDIA-Tesla T4": 15360,
    "NVIDIA-GeForce RTX 4090": 24564,
    "NVIDIA": 16384,
}
NAMESPACES = ("default", "team")
# Now as the oracle and the engine both see it is the wall clock: handshake stamps are relative.
HANDSHAKE_AGES = {"fresh": 5, "stale": 3600}

UUID_KEYS = ("nvidia.com/use-gpuuuid", "nvidia.com/nouse-gpuuuid")
TYPE_KEYS = ("nvidia.com/use-gputype", "nvidia.com/nouse-gputype")
# Look-alike keys that HAMi's NVIDIA backend does not read: they must change nothing.
FOREIGN_TYPE_KEYS = ("hami.io/use-gputype", "hami.io/nouse-gputype", "nvidia.com/use-gpu-type")
NODE_POLICIES = ("binpack", "spread")
GPU_POLICIES = ("spread", "binpack", "topology-aware", "mutex", "numa", "binpack,numa", "numa,spread", "mutex,binpack")
# Pod annotations only (the flag takes names and binpack/spread/numa chains): untrimmed or mixed-case
# names, and chains with the mutex and topology-aware filters, which are no sort keys.
ANNOTATION_ONLY_GPU_POLICIES = (
    " binpack",
    "spread, numa",
    "bogus",
    "Binpack",
    " topology-aware",
    "topology-aware,binpack",
    "numa,topology-aware",
    "mutex,topology-aware",
    "mutex, numa",
    "",
)


def quantity(value: int) -> st.SearchStrategy[str]:
    """The same integer in the spellings Kubernetes accepts."""
    spellings = [str(value)]
    if value and value % 1000 == 0:
        spellings += [f"{value // 1000}k", f"{value // 1000}e3"]
    if value and value % 1024 == 0:
        spellings.append(f"{value // 1024}Ki")
    return st.sampled_from(spellings)


@st.composite
def devices(draw, node: str) -> list[dict[str, Any]]:
    n = draw(st.sampled_from([st.integers(1, 4)] * 8 + [st.integers(5, 12), st.integers(13, 20)]))
    n = draw(n)
    mixed = draw(st.booleans())
    model = draw(st.sampled_from(sorted(MODELS)))
    split = draw(st.sampled_from([1, 2, 4, 10]))
    out = []
    for i in range(n):
        this_model = draw(st.sampled_from(sorted(MODELS))) if mixed else model
        d: dict[str, Any] = {
            "id": f"GPU-{node}-{i}",
            "count": draw(st.sampled_from([split, split, 1, 10])),
            "devmem": MODELS[this_model],
            "devcore": draw(st.sampled_from([100, 100, 100, 0, 200])),
            "type": this_model,
            # MIG devices are left out: hami_fast does not place pods on them (docs/compatibility.md).
            "mode": draw(st.sampled_from(["hami-core"] * 8 + ["mps", "missing"])),
            "health": draw(st.integers(0, 9)) != 0,
        }
        index = draw(st.sampled_from(["own", "own", "own", "missing", "duplicate"]))
        if index == "own" and i:
            d["index"] = i
        elif index == "duplicate":
            d["index"] = max(0, i - 1)
        numa = draw(st.sampled_from([0, 0, 1, i % 2, i % 4]))
        if numa:
            d["numa"] = numa
        if d["mode"] == "missing":
            del d["mode"]  # an older device plugin registers no mode
        out.append(d)
    return out


def pair_scores(devs: list[dict[str, Any]], draw) -> str:
    return json.dumps(
        [{"uuid": a["id"], "score": {b["id"]: draw(st.integers(0, 3)) * 10 for b in devs if b is not a}} for a in devs]
    )


@st.composite
def node(draw, name: str, now: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    devs = draw(devices(name))
    annotations: dict[str, str] = {}
    register = draw(st.sampled_from(["ok"] * 18 + ["missing", "malformed"]))
    if register == "ok":
        annotations["hami.io/node-nvidia-register"] = json.dumps(devs, separators=(",", ":"))
    elif register == "malformed":
        annotations["hami.io/node-nvidia-register"] = "[{" + json.dumps(devs)[2:-5]
    if draw(st.integers(0, 4)) == 0:
        annotations["hami.io/node-nvidia-score"] = pair_scores(devs, draw)
    if draw(st.integers(0, 6)) == 0:
        annotations["hami.io/device-cordon"] = ",".join(d["id"] for d in devs if draw(st.booleans()))
    handshake = draw(st.sampled_from(["none", "none", "reported", "fresh", "stale", "garbage"]))
    if handshake != "none":
        annotations["hami.io/node-handshake"] = handshake_value(handshake, now)
    allocatable = {"cpu": "8", "memory": "32Gi"}
    gpus = draw(st.sampled_from(["all", "all", "all", "missing", "zero"]))
    if gpus == "all":
        allocatable["nvidia.com/gpu"] = str(sum(d["count"] for d in devs))
    elif gpus == "zero":
        allocatable["nvidia.com/gpu"] = "0"
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": annotations},
        "status": {"allocatable": allocatable},
    }
    return obj, devs if register == "ok" else []


def handshake_value(kind: str, now: int) -> str:
    import time

    if kind == "reported":
        return "Reported_" + time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now - 30))
    if kind == "garbage":
        return "Requesting_yesterday"
    return "Requesting_" + time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now - HANDSHAKE_AGES[kind]))


@st.composite
def container_resources(draw, gpu: bool) -> dict[str, Any]:
    if not gpu:
        return draw(st.sampled_from([{}, {"limits": {"cpu": "1"}}]))
    limits: dict[str, str] = {}
    if draw(st.integers(0, 5)):
        limits["nvidia.com/gpu"] = draw(st.sampled_from([1, 1, 1, 2, 2, 3, 4, 0]).flatmap(quantity))
    memory = draw(st.sampled_from(["mem", "mem", "percent", "none"]))
    if memory == "mem":
        limits["nvidia.com/gpumem"] = draw(
            st.sampled_from([0, 500, 1000, 2000, 3000, 8000, 16000, 40000]).flatmap(quantity)
        )
    elif memory == "percent":
        limits["nvidia.com/gpumem-percentage"] = str(draw(st.sampled_from([0, 10, 25, 50, 100, 101, 150])))
    if draw(st.booleans()):
        limits["nvidia.com/gpucores"] = str(draw(st.sampled_from([0, 10, 30, 50, 100, 150])))
    if not limits:
        limits["nvidia.com/gpu"] = "1"
    if draw(st.integers(0, 5)) == 0:
        return {"requests": limits, "limits": {k: v for k, v in limits.items() if draw(st.booleans())}}
    return {"limits": limits}


@st.composite
def containers(draw, prefix: str, count: st.SearchStrategy[int], gpu_share: int) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(count)):
        c: dict[str, Any] = {"name": f"{prefix}{i}", "image": "x"}
        res = draw(container_resources(draw(st.integers(0, 9)) < gpu_share))
        if res:
            c["resources"] = res
        if draw(st.integers(0, 30)) == 0:
            c["securityContext"] = {"privileged": True}
        if prefix == "init" and draw(st.integers(0, 4)) == 0:
            c["restartPolicy"] = "Always"  # a native sidecar
        out.append(c)
    return out


def requests_gpu(container: dict[str, Any], count_name: str = "nvidia.com/gpu") -> bool:
    """The container asks for GPUs (a positive integer `count_name`, limits before requests)."""
    res = container.get("resources") or {}
    for part in ("limits", "requests"):
        value = (res.get(part) or {}).get(count_name)
        if value is not None:
            try:
                return int(str(value).replace("k", "000").replace("e3", "000")) > 0
            except ValueError:
                return False
    return False


def annotation_slots(chosen: list[list[tuple[str, int, int]]], uses_gpu: list[bool], positional: bool) -> str:
    """A device list as a scheduler wrote it: positional, or one slot per GPU container (HAMi)."""
    slots = []
    for devs, gpu in zip(chosen, uses_gpu, strict=True):
        if not gpu and not positional:
            continue
        slots.append("".join(f"{u},NVIDIA,{m},{c}:" for u, m, c in devs) + ";")
    return "".join(slots)


@st.composite
def resident_pod(draw, i: int, nodes: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    node_name, devs = draw(st.sampled_from(nodes))
    init = draw(containers("init", st.integers(0, 2), 4))
    app = draw(containers("c", st.integers(1, 3), 7))
    if not any(requests_gpu(c) for c in init + app):
        app[0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    uses_gpu = [requests_gpu(c) for c in init + app]
    uuids = [d["id"] for d in devs] or [f"GPU-{node_name}-0"]
    chosen = []
    for gpu in uses_gpu:
        if not gpu:
            chosen.append([])
            continue
        k = draw(st.integers(1, min(2, len(uuids))))
        picks = draw(st.lists(st.sampled_from(uuids + ["GPU-gone"]), min_size=k, max_size=k, unique=True))
        mem = draw(st.sampled_from([0, 1000, 2000, 4000, 8000, 16000, 30000]))
        cores = draw(st.sampled_from([0, 0, 10, 30, 100]))
        chosen.append([(u, mem, cores) for u in picks])
    allocated = annotation_slots(chosen, uses_gpu, draw(st.booleans()))
    if draw(st.integers(0, 25)) == 0:
        allocated = draw(st.sampled_from(["GPU-x,NVIDIA:;", "GPU-x,NVIDIA,lots,0:;", allocated + "junk,NVIDIA,1,x:;"]))
    metadata: dict[str, Any] = {
        "name": f"res-{i}",
        "namespace": draw(st.sampled_from(NAMESPACES)),
        "uid": f"uid-res-{i}",
        "annotations": {
            "hami.io/vgpu-node": node_name,
            "hami.io/vgpu-devices-allocated": allocated,
            "hami.io/vgpu-devices-to-allocate": ";",
        },
    }
    if draw(st.integers(0, 7)) == 0:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {"phase": draw(st.sampled_from(["Running"] * 6 + ["Pending", "Succeeded", "Failed"]))}
    if draw(st.integers(0, 15)) == 0:
        status = draw(st.sampled_from([{"phase": "Unknown"}, {"phase": ""}, {}]))  # odd or no phase: still counted
    if init and draw(st.booleans()):
        done = draw(st.booleans())
        status["initContainerStatuses"] = [
            {
                "name": c["name"],
                "ready": False,
                "restartCount": 0,
                "image": "x",
                "imageID": "",
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}} if done else {"running": {}},
            }
            for c in init
        ]
    spec: dict[str, Any] = {"containers": app}
    if draw(st.integers(0, 7)):
        spec["nodeName"] = node_name  # else Filter assigned it and it is not bound yet
    if init:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


# Keys HAMi does not manage: a quota on them must change nothing.
UNMANAGED_QUOTA_KEYS = ("requests.nvidia.com/gpumem", "limits.nvidia.com/gpumem-percentage", "limits.cpu")


@st.composite
def quotas(draw) -> list[dict[str, Any]]:
    """At most one quota per namespace names each managed key: with two, HAMi keeps the one its
    informer saw last (docs/compatibility.md), which a snapshot does not say."""
    out = []
    for i, ns in enumerate(NAMESPACES):
        if draw(st.integers(0, 3)):
            continue
        mem = "limits.nvidia.com/gpumem"
        cores = "limits.nvidia.com/gpucores"
        hard = {}
        if draw(st.booleans()):
            hard[mem] = draw(st.sampled_from([0, 4000, 10000, 30000, 100000]).flatmap(quantity))
        if draw(st.booleans()) or not hard:
            hard[cores] = draw(st.sampled_from([0, 50, 100, 300]).flatmap(quantity))
        if draw(st.integers(0, 3)) == 0:
            hard[draw(st.sampled_from(UNMANAGED_QUOTA_KEYS))] = "1"
        split = len(hard) > 1 and draw(st.integers(0, 3)) == 0  # the same limits as two objects
        parts = [{k: v} for k, v in hard.items()] if split else [hard]
        for j, part in enumerate(parts):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": {"name": f"q{i}-{j}", "namespace": ns},
                    "spec": {"hard": part},
                }
            )
    return out


@st.composite
def pod_annotations(draw, uuids: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key in TYPE_KEYS:
        if draw(st.integers(0, 7)) == 0:
            out[key] = draw(
                st.sampled_from(["V100", "A100", "T4", "NVIDIA", "4090,T4", "a100", " t4 , V100", "T4,", "", " "])
            )
    if draw(st.integers(0, 15)) == 0:
        out[draw(st.sampled_from(FOREIGN_TYPE_KEYS))] = draw(st.sampled_from(["V100", "A100", "T4", "NVIDIA"]))
    for key in UUID_KEYS:
        if uuids and draw(st.integers(0, 7)) == 0:
            picks = draw(st.lists(st.sampled_from(uuids + ["GPU-gone"]), min_size=1, max_size=3, unique=True))
            out[key] = draw(st.sampled_from([",", ", ", " , "])).join(picks) + draw(st.sampled_from(["", "", ","]))
        elif draw(st.integers(0, 40)) == 0:
            out[key] = draw(st.sampled_from(["", " "]))
    if draw(st.integers(0, 5)) == 0:
        out["nvidia.com/numa-bind"] = draw(st.sampled_from(["true", "1", "false", "yes", "True", "0"]))
    if draw(st.integers(0, 7)) == 0:
        out["nvidia.com/vgpu-mode"] = draw(st.sampled_from(["hami-core", "mps", "mig", "hami-core,mps", "MPS", ""]))
    if draw(st.integers(0, 4)) == 0:
        out["hami.io/node-scheduler-policy"] = draw(
            st.sampled_from(
                [
                    "binpack",
                    "spread",
                    "Spread",
                    "other",
                    "fgd",
                    " spread",
                    "spread,binpack",
                    "bestfit",
                    "fgd-balance",
                    "",
                ]
            )
        )
    if draw(st.integers(0, 4)) == 0:
        out["hami.io/gpu-scheduler-policy"] = draw(st.sampled_from([*GPU_POLICIES, *ANNOTATION_ONLY_GPU_POLICIES]))
    if draw(st.integers(0, 6)) == 0:
        out["hami.io/device-scoring-weights"] = draw(
            st.sampled_from(
                ["slot=1,core=1,memory=1", "slot=0,core=0,memory=1", "slot=3,core=1,memory=0", "slot=x,core=1,memory=1"]
            )
        )
    return out


@st.composite
def new_pod(draw, uuids: list[str]) -> dict[str, Any]:
    init = draw(containers("init", st.sampled_from([0, 0, 0, 1, 2]), 3))
    app = draw(containers("c", st.integers(1, 4), 6))
    if draw(st.integers(0, 9)):
        app[0]["resources"] = draw(container_resources(True))
    metadata = {"name": "new", "namespace": draw(st.sampled_from(NAMESPACES)), "uid": "uid-new"}
    ann = draw(pod_annotations(uuids))
    if ann:
        metadata["annotations"] = ann
    spec: dict[str, Any] = {"containers": app}
    if init:
        spec["initContainers"] = init
    if draw(st.integers(0, 30)) == 0:
        spec["schedulerName"] = draw(st.sampled_from(["other-scheduler", "default-scheduler"]))
    if draw(st.integers(0, 40)) == 0:
        spec["nodeName"] = "node-0"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@st.composite
def cases(draw, max_nodes: int = 4, max_pods: int = 6) -> dict[str, Any]:
    import time

    now = int(time.time())
    nodes = []
    registered: list[tuple[str, list[dict[str, Any]]]] = []
    for i in range(draw(st.integers(1, max_nodes))):
        obj, devs = draw(node(f"node-{i}", now))
        nodes.append(obj)
        registered.append((obj["metadata"]["name"], devs))
    pods = [draw(resident_pod(i, registered)) for i in range(draw(st.integers(0, max_pods)))]
    uuids = [d["id"] for _, devs in registered for d in devs]
    return {
        "items": nodes + pods + draw(quotas()),
        "pod": draw(new_pod(uuids)),
        "node_policy": draw(st.sampled_from(NODE_POLICIES)),
        "gpu_policy": draw(st.sampled_from(GPU_POLICIES)),
    }

"""Hypothesis strategies for clusters with GPUs in MIG mode, as HAMi v2.10's dynamic MIG sees them.

A MIG GPU registers with `mode: mig`, `devcore: 100`, its whole memory as `devmem`, `count` = the
largest instance count of its profiles, and `migProfiles`: the allowlisted profiles NVML reports,
each with its memory, its share of the SMs (`core`), slice count and legal placements. Resident
pods on it carry `hami.io/vgpu-mig-allocations` (profile and placement per container device) and
the profile's memory and cores in `hami.io/vgpu-devices-allocated`.

Drawn small (1-3 nodes, 1-4 GPUs) so that a GPU's placements run out, profiles are skipped for a
taken placement, and one container takes several instances of one GPU. Now and then the data are
inconsistent as a broken cluster can leave them: a MIG pod without reservations, a reservation on
a `hami-core` GPU or on a GPU the node lacks, overlapping placements, a malformed annotation.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from hamigen.strategies import NAMESPACES, handshake_value, quantity

MIG_KEY = "hami.io/vgpu-mig-allocations"


def _profile(name: str, memory: int, core: int, slices: int, starts: list[int], size: int) -> dict[str, Any]:
    return {
        "name": name,
        "memoryMB": memory,
        "core": core,
        "sliceCount": slices,
        "placements": [{"start": s, "size": size} for s in starts],
    }


# NVML's profiles of the models in HAMi's default migProfileAllowlist (memory in MiB as NVML
# reports it, `core` = the profile's SMs as a percentage of the whole GPU's, rounded up).
MIG_MODELS: dict[str, tuple[int, list[dict[str, Any]]]] = {
    "NVIDIA-A100-SXM4-40GB": (
        40960,
        [
            _profile("1g.5gb", 4864, 15, 1, [0, 1, 2, 3, 4, 5, 6], 1),
            _profile("2g.10gb", 9856, 29, 2, [0, 2, 4], 2),
            _profile("3g.20gb", 19968, 43, 3, [0, 4], 4),
            _profile("7g.40gb", 40192, 100, 7, [0], 8),
        ],
    ),
    "NVIDIA-A100-SXM4-80GB": (
        81920,
        [
            _profile("1g.10gb", 9728, 15, 1, [0, 1, 2, 3, 4, 5, 6], 1),
            _profile("2g.20gb", 19968, 29, 2, [0, 2, 4], 2),
            _profile("3g.40gb", 40192, 43, 3, [0, 4], 4),
            _profile("7g.79gb", 80384, 100, 7, [0], 8),
        ],
    ),
    "NVIDIA-A30": (
        24576,
        [
            _profile("1g.6gb", 5836, 25, 1, [0, 1, 2, 3], 1),
            _profile("2g.12gb", 11904, 50, 2, [0, 2], 2),
            _profile("4g.24gb", 24064, 100, 4, [0], 4),
        ],
    ),
    "NVIDIA-H100-SXM5-80GB": (
        81559,
        [
            _profile("1g.10gb", 9984, 16, 1, [0, 1, 2, 3, 4, 5, 6], 1),
            _profile("2g.20gb", 20096, 31, 2, [0, 2, 4], 2),
            _profile("3g.40gb", 40320, 46, 3, [0, 4], 4),
            _profile("7g.80gb", 80896, 100, 7, [0], 8),
        ],
    ),
}
PLAIN_MODELS = {"NVIDIA-A100-SXM4-40GB": 40960, "NVIDIA-Tesla T4": 15360}
# First the values that fit an instance: hypothesis draws a list's first element most often.
MEMORY_REQUESTS = [4000, 8000, 1000, 4864, 5000, 9856, 10000, 12000, 15000, 20000, 24000, 30000, 40000, 41000, 0]
GPU_POLICIES = ("spread", "binpack", "topology-aware", "mutex", "numa", "binpack,numa", "topology-aware,binpack")


def instance_count(profiles: list[dict[str, Any]]) -> int:
    """The device plugin's `count`: the largest instance count (one per slice of a 1-slice profile)."""
    return max((len(p["placements"]) for p in profiles), default=0)


@st.composite
def mig_profiles(draw, model: str) -> list[dict[str, Any]]:
    profiles = [dict(p) for p in MIG_MODELS[model][1]]
    shape = draw(st.sampled_from(["all"] * 6 + ["subset", "reordered", "odd"]))
    if shape == "subset":
        kept = draw(st.lists(st.sampled_from(range(len(profiles))), min_size=1, max_size=len(profiles), unique=True))
        profiles = [profiles[i] for i in sorted(kept)]
    elif shape == "reordered":
        profiles = draw(st.permutations(profiles))
    elif shape == "odd":
        odd = draw(st.sampled_from(["same-memory", "no-placements", "duplicate-name"]))
        if odd == "same-memory":  # a tie on memory decided by slice count, then by order
            profiles.append({**profiles[0], "name": "1g.5gb+me", "sliceCount": 2})
        elif odd == "no-placements":
            profiles[0] = {**profiles[0], "placements": []}
        else:
            profiles.append({**profiles[1], "memoryMB": profiles[0]["memoryMB"] - 100, "name": profiles[0]["name"]})
    return profiles


@st.composite
def gpus(draw, node: str) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 4))
    model = draw(st.sampled_from(sorted(MIG_MODELS)))
    mixed = draw(st.integers(0, 3)) == 0
    out = []
    for i in range(n):
        mig = not mixed or draw(st.booleans())
        if mig:
            memory, _ = MIG_MODELS[model]
            profiles = draw(mig_profiles(model))
            count = instance_count(profiles)
            d: dict[str, Any] = {
                "id": f"GPU-{node}-{i}",
                "count": draw(st.sampled_from([count] * 6 + [1, 2])),
                "devmem": draw(st.sampled_from([memory] * 5 + [profiles[-1]["memoryMB"] if profiles else memory])),
                "devcore": 100,
                "type": model,
                "mode": "mig",
                "migProfiles": profiles,
                "health": draw(st.integers(0, 20)) != 0,
            }
        else:
            plain = draw(st.sampled_from(sorted(PLAIN_MODELS)))
            d = {
                "id": f"GPU-{node}-{i}",
                "count": draw(st.sampled_from([10, 4])),
                "devmem": PLAIN_MODELS[plain],
                "devcore": 100,
                "type": plain,
                "mode": draw(st.sampled_from(["hami-core", "hami-core", "mps"])),
                "health": True,
            }
        if i:
            d["index"] = i
        numa = draw(st.sampled_from([0, 0, i % 2]))
        if numa:
            d["numa"] = numa
        out.append(d)
    return out


@st.composite
def mig_node(draw, name: str, now: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    devs = draw(gpus(name))
    annotations = {"hami.io/node-nvidia-register": json.dumps(devs, separators=(",", ":"))}
    if draw(st.integers(0, 4)) == 0:
        annotations["hami.io/node-nvidia-score"] = json.dumps(
            [
                {"uuid": a["id"], "score": {b["id"]: draw(st.integers(0, 3)) * 10 for b in devs if b is not a}}
                for a in devs
            ]
        )
    if draw(st.integers(0, 12)) == 0:
        annotations["hami.io/device-cordon"] = devs[0]["id"]
    handshake = draw(st.sampled_from(["none", "reported", "fresh"]))
    if handshake != "none":
        annotations["hami.io/node-handshake"] = handshake_value(handshake, now)
    allocatable = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": str(sum(d["count"] for d in devs))}
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": annotations},
        "status": {"allocatable": allocatable},
    }
    return obj, devs


def overlaps(a: dict[str, int], b: dict[str, int]) -> bool:
    return a["start"] < b["start"] + b["size"] and b["start"] < a["start"] + a["size"]


@st.composite
def instance(draw, dev: dict[str, Any], held: list[dict[str, int]]) -> tuple[dict[str, Any], dict[str, int]] | None:
    """A profile and a placement free of `held` on a MIG GPU (any free one: other schedulers,
    other policies and deleted neighbours leave every kind of layout), or None when full."""
    free = [(p, pl) for p in dev["migProfiles"] for pl in p["placements"] if not any(overlaps(pl, h) for h in held)]
    if not free:
        return None
    return draw(st.sampled_from(free))


@st.composite
def resident(
    draw, i: int, nodes: list[tuple[str, list[dict[str, Any]]]], held: dict[str, list[dict[str, int]]], broken: bool
):
    node_name, devs = draw(st.sampled_from(nodes))
    n_containers = draw(st.sampled_from([1, 1, 1, 2]))
    init = draw(st.integers(0, 5)) == 0
    slots: list[str] = []
    allocations: list[dict[str, Any]] = []
    containers = []
    for ci in range(n_containers + int(init)):
        picks = draw(st.lists(st.sampled_from(devs), min_size=1, max_size=2))
        entries = []
        for di, dev in enumerate(picks):
            if dev.get("mode") == "mig":
                got = draw(instance(dev, held.setdefault(dev["id"], [])))
                if got is None:
                    continue
                profile, placement = got
                held[dev["id"]].append(placement)
                entries.append(f"{dev['id']},NVIDIA,{profile['memoryMB']},{profile['core']}:")
                entry = {
                    "containerIndex": ci,
                    "deviceIndex": len(entries) - 1,
                    "gpuUUID": dev["id"],
                    "profile": profile["name"],
                    "placement": placement,
                }
                if draw(st.integers(0, 3)) == 0:  # the device plugin realized it
                    entry.update(migUUID=f"MIG-{dev['id']}-{ci}-{di}", gpuInstanceID=draw(st.integers(1, 14)))
                    entry["computeInstanceID"] = 0
                allocations.append(entry)
            else:
                entries.append(f"{dev['id']},NVIDIA,{draw(st.sampled_from([1000, 4000, 8000]))},0:")
        slots.append("".join(entries) + ";")
        c = {"name": f"c{ci}", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(max(1, len(entries)))}}}
        containers.append(c)
    annotations = {
        "hami.io/vgpu-node": node_name,
        "hami.io/vgpu-devices-allocated": "".join(slots),
        "hami.io/vgpu-devices-to-allocate": ";",
    }
    flaws = ["no-mig", "malformed", "unknown-gpu", "plain-gpu", "overlap", "partial", "no-device-list"]
    flaw = draw(st.sampled_from(["none"] * 4 + flaws)) if broken else "none"
    if flaw == "unknown-gpu" and allocations:
        allocations.append({**allocations[0], "deviceIndex": 9, "gpuUUID": "GPU-gone"})
    elif flaw == "plain-gpu":
        plain = [d for d in devs if d.get("mode") != "mig"]
        if plain:
            placement = {"start": 0, "size": 1}
            allocations.append(
                {
                    "containerIndex": 0,
                    "deviceIndex": 8,
                    "gpuUUID": plain[0]["id"],
                    "profile": "1g.5gb",
                    "placement": placement,
                }
            )
    elif flaw == "overlap" and allocations:
        allocations.append({**allocations[0], "deviceIndex": 7})
    elif flaw == "partial" and allocations:
        allocations[0] = {**allocations[0], "migUUID": "MIG-half"}
        allocations[0].pop("gpuInstanceID", None)
    if flaw == "malformed":
        annotations[MIG_KEY] = draw(st.sampled_from(["[{", '{"a":1}', "[null]", json.dumps(allocations)[:-1]]))
    elif allocations and flaw != "no-mig":
        annotations[MIG_KEY] = json.dumps(allocations, separators=(",", ":"))
    if flaw == "no-device-list":  # assigned, its devices annotation lost: HAMi still counts its instances
        del annotations["hami.io/vgpu-devices-allocated"]
    spec: dict[str, Any] = {"nodeName": node_name}
    if init:
        spec["initContainers"], spec["containers"] = containers[:1], containers[1:]
    else:
        spec["containers"] = containers
    metadata = {"name": f"res-{i}", "namespace": draw(st.sampled_from(NAMESPACES)), "uid": f"uid-res-{i}"}
    metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": "Running"}}


@st.composite
def mig_container(draw, name: str) -> dict[str, Any]:
    limits: dict[str, str] = {"nvidia.com/gpu": draw(st.sampled_from([1, 1, 1, 2, 2, 3, 5, 8]).flatmap(quantity))}
    memory = draw(st.sampled_from(["mem"] * 6 + ["percent", "none"]))
    if memory == "mem":
        limits["nvidia.com/gpumem"] = draw(st.sampled_from(MEMORY_REQUESTS).flatmap(quantity))
    elif memory == "percent":
        limits["nvidia.com/gpumem-percentage"] = str(draw(st.sampled_from([10, 25, 50, 100])))
    if draw(st.integers(0, 3)) == 0:
        limits["nvidia.com/gpucores"] = str(draw(st.sampled_from([0, 10, 15, 30, 50, 100])))
    return {"name": name, "image": "x", "resources": {"limits": limits}}


@st.composite
def mig_pod(draw, uuids: list[str]) -> dict[str, Any]:
    app = [draw(mig_container(f"c{i}")) for i in range(draw(st.sampled_from([1, 1, 1, 2, 3])))]
    if draw(st.integers(0, 4)) == 0:
        app.insert(draw(st.integers(0, len(app))), {"name": "sidecar", "image": "x"})
    spec: dict[str, Any] = {"containers": app}
    if draw(st.integers(0, 5)) == 0:
        spec["initContainers"] = [draw(mig_container("init0"))]
    annotations: dict[str, str] = {}
    if draw(st.integers(0, 2)) == 0:
        annotations["nvidia.com/vgpu-mode"] = draw(st.sampled_from(["mig"] * 4 + ["hami-core", "hami-core,mig", ""]))
    if draw(st.integers(0, 7)) == 0:
        annotations["nvidia.com/use-gputype"] = draw(st.sampled_from(["A100", "A30", "H100", "T4"]))
    if uuids and draw(st.integers(0, 7)) == 0:
        annotations[draw(st.sampled_from(["nvidia.com/use-gpuuuid", "nvidia.com/nouse-gpuuuid"]))] = draw(
            st.sampled_from(uuids)
        )
    if draw(st.integers(0, 7)) == 0:
        annotations["nvidia.com/numa-bind"] = "true"
    if draw(st.integers(0, 5)) == 0:
        annotations["hami.io/gpu-scheduler-policy"] = draw(st.sampled_from(GPU_POLICIES))
    metadata: dict[str, Any] = {"name": "new", "namespace": draw(st.sampled_from(NAMESPACES)), "uid": "uid-new"}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@st.composite
def mig_quota(draw) -> list[dict[str, Any]]:
    if draw(st.integers(0, 4)):
        return []
    hard = {"limits.nvidia.com/gpumem": draw(st.sampled_from([10000, 30000, 60000]).flatmap(quantity))}
    if draw(st.booleans()):
        hard["limits.nvidia.com/gpucores"] = str(draw(st.sampled_from([30, 100])))
    meta = {"name": "q", "namespace": draw(st.sampled_from(NAMESPACES))}
    return [{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta, "spec": {"hard": hard}}]


@st.composite
def mig_cases(draw) -> dict[str, Any]:
    import time

    now = int(time.time())
    nodes, registered = [], []
    for i in range(draw(st.integers(1, 3))):
        obj, devs = draw(mig_node(f"node-{i}", now))
        nodes.append(obj)
        registered.append((obj["metadata"]["name"], devs))
    held: dict[str, list[dict[str, int]]] = {}
    broken = draw(st.integers(0, 3)) == 0  # inconsistent MIG data somewhere in the cluster
    pods = [draw(resident(i, registered, held, broken)) for i in range(draw(st.integers(0, 6)))]
    uuids = [d["id"] for _, devs in registered for d in devs]
    return {
        "items": nodes + pods + draw(mig_quota()),
        "pod": draw(mig_pod(uuids)),
        "node_policy": draw(st.sampled_from(["binpack", "spread"])),
        "gpu_policy": draw(st.sampled_from(GPU_POLICIES)),
    }

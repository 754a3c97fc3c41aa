"""Plain-Python reference of HAMi v2.10.0 NVIDIA fit and score, for differential tests only.

Every function follows one section (§, cited in its docstring) of the written reading of HAMi's
scheduler it was built from (not part of this repository), plus the team's decisions for the places
that reading leaves open. Clarity wins over speed here: the
engine in ``rust/`` is fast, this file is meant to be read and checked by eye.

Entry point: :func:`explain`, the same question ``hami_fast._native.Cluster.explain`` answers.
"""

import copy
import itertools
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from .quantity import quantity_int

# Resource names (§2.1) and annotation keys (§2.3, §3.1, §4.1).
GPU = "nvidia.com/gpu"
GPUMEM = "nvidia.com/gpumem"
GPUMEM_PERCENTAGE = "nvidia.com/gpumem-percentage"
GPUCORES = "nvidia.com/gpucores"

REGISTER = "hami.io/node-nvidia-register"
PAIR_SCORES = "hami.io/node-nvidia-score"
DEVICE_CORDON = "hami.io/device-cordon"

VGPU_NODE = "hami.io/vgpu-node"
VGPU_TIME = "hami.io/vgpu-time"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
ALLOCATED = "hami.io/vgpu-devices-allocated"

USE_GPUTYPE = "nvidia.com/use-gputype"
NOUSE_GPUTYPE = "nvidia.com/nouse-gputype"
USE_GPUUUID = "nvidia.com/use-gpuuuid"
NOUSE_GPUUUID = "nvidia.com/nouse-gpuuuid"
NUMA_BIND = "nvidia.com/numa-bind"
VGPU_MODE = "nvidia.com/vgpu-mode"
NODE_POLICY = "hami.io/node-scheduler-policy"
GPU_POLICY = "hami.io/gpu-scheduler-policy"
SCORING_WEIGHTS = "hami.io/device-scoring-weights"

QUOTA_MEM = "limits.nvidia.com/gpumem"
QUOTA_CORES = "limits.nvidia.com/gpucores"

MAX_INT32 = 2**31 - 1
PCT_UNSET = 101
WEIGHT = 10.0
NVIDIA = "NVIDIA"

# Fit reason keys (§9.4).
CARD_NOT_HEALTH = "CardNotHealth"
CARD_CORDONED = "CardCordoned"
CARD_TYPE_MISMATCH = "CardTypeMismatch"
NUMA_NOT_FIT = "NumaNotFit"
CARD_UUID_MISMATCH = "CardUuidMismatch"
TIME_SLICING_EXHAUSTED = "CardTimeSlicingExhausted"
EXCLUSIVE_CONFLICT = "ExclusiveDeviceAllocateConflict"
QUOTA_NOT_FIT = "ResourceQuotaNotFit"
INSUFFICIENT_MEMORY = "CardInsufficientMemory"
INSUFFICIENT_CORE = "CardInsufficientCore"
COMPUTE_EXHAUSTED = "CardComputeUnitsExhausted"
NOT_ENOUGH_PICKED = "AllocatedCardsInsufficientRequest"
NODE_INSUFFICIENT_DEVICE = "NodeInsufficientDevice"
NODE_UNREGISTERED = "node unregistered"


@dataclass(frozen=True)
class Config:
    """The device-config values that change request derivation (§2.1 defaults)."""

    default_memory: int = 0
    default_cores: int = 0
    memory_factor: int = 1


@dataclass(frozen=True)
class Request:
    """One container's NVIDIA request (§2.2)."""

    nums: int
    mem: int
    pct: int
    cores: int


class Entry(NamedTuple):
    """One device given to one container: ``UUID,NVIDIA,mem,cores`` in §4.2."""

    uuid: str
    mem: int
    cores: int


@dataclass
class Usage:
    """Usage of one device: split slots taken, MiB and core percent."""

    used: int = 0
    mem: int = 0
    cores: int = 0


@dataclass(frozen=True)
class Device:
    """One registered GPU (§3.2); ``pos`` is its position in the register annotation."""

    pos: int
    id: str
    count: int
    devmem: int
    devcore: int
    type: str
    numa: int
    mode: str
    health: bool


@dataclass
class Node:
    name: str
    devices: list
    pair_scores: dict = field(default_factory=dict)  # uuid -> {peer uuid: score}
    cordoned: frozenset = frozenset()

    def position(self, uuid):
        """Position of the first device with this UUID (linear scan, §9.2), or None."""
        for device in self.devices:
            if device.id == uuid:
                return device.pos
        return None


@dataclass
class PodContext:
    """What Fit needs to know about the pod being placed."""

    annotations: dict
    namespace: str
    n_init: int
    gpu_policy: str
    weights: tuple
    quota_limit: dict  # "mem"/"cores" -> int, only for limits that are set
    quota_used: dict  # "mem"/"cores" -> int

    @property
    def mutex(self):
        return "mutex" in self.gpu_policy

    @property
    def topology(self):
        return "topology-aware" in self.gpu_policy

    @property
    def numa_bind(self):
        return self.annotations.get(NUMA_BIND) in ("1", "t", "T", "true", "TRUE", "True")


# ---------------------------------------------------------------------------------------------
# Small helpers for Kubernetes objects


def _metadata(obj):
    return obj.get("metadata") or {}


def _annotations(obj):
    return _metadata(obj).get("annotations") or {}


def _init_containers(pod):
    return (pod.get("spec") or {}).get("initContainers") or []


def _containers(pod):
    return (pod.get("spec") or {}).get("containers") or []


def _resource(container, name):
    """``(present, value)`` of a resource, limits before requests (§2.1)."""
    resources = container.get("resources") or {}
    for part in ("limits", "requests"):
        values = resources.get(part) or {}
        if name in values:
            return True, values[name]
    return False, None


def _tokens(value):
    """Comma list -> trimmed, non-empty tokens."""
    return [token.strip() for token in value.split(",") if token.strip()]


# ---------------------------------------------------------------------------------------------
# §6.2 webhook defaults and §2.2 request derivation


def apply_webhook_defaults(pod):
    """A copy of the pod with the NVIDIA per-container mutation of §6.2 applied."""
    pod = copy.deepcopy(pod)
    for container in _init_containers(pod) + _containers(pod):
        _mutate_container(container)
    return pod


def _mutate_container(container):
    resources = container.get("resources") or {}
    limits = dict(resources.get("limits") or {})
    if GPU not in limits and any(name in limits for name in (GPUCORES, GPUMEM, GPUMEM_PERCENTAGE)):
        limits[GPU] = 1
    has_count = GPU in limits or _resource(container, GPU)[0]
    if has_count and not _resource(container, GPUCORES)[0] and _wants_whole_card(container):
        limits[GPUCORES] = 100
    if limits:
        container["resources"] = {**resources, "limits": limits}


def _wants_whole_card(container):
    """gpumem-percentage == 100, or no percentage and no gpumem (§6.2 exclusive-core default)."""
    has_pct, pct = _resource(container, GPUMEM_PERCENTAGE)
    if has_pct:
        return quantity_int(pct) == 100
    return not _resource(container, GPUMEM)[0]


def container_request(container, config=Config()):
    """§2.2: the container's NVIDIA request, or None when it requests nothing (Nums <= 0)."""
    has_count, count = _resource(container, GPU)
    nums = quantity_int(count) if has_count else None
    if nums is None or nums <= 0:
        return None
    mem = 0
    has_mem, mem_value = _resource(container, GPUMEM)
    if has_mem:
        mem = quantity_int(mem_value)
        if mem is None or mem < 0 or mem > MAX_INT32 // max(config.memory_factor, 1):
            return None
        if config.memory_factor > 1:
            mem *= config.memory_factor
    pct = PCT_UNSET
    has_pct, pct_value = _resource(container, GPUMEM_PERCENTAGE)
    pct_int = quantity_int(pct_value) if has_pct else None
    if pct_int is not None and pct_int > 0:
        pct = min(pct_int, 100)
    if pct == PCT_UNSET and mem == 0:
        if config.default_memory != 0:
            mem = config.default_memory
        else:
            pct = 100
    cores = config.default_cores
    has_cores, cores_value = _resource(container, GPUCORES)
    if has_cores and quantity_int(cores_value) is not None:
        cores = quantity_int(cores_value)
    return Request(nums=nums, mem=mem, pct=pct, cores=cores)


def pod_requests(pod, config=Config()):
    """One entry per container slot, init containers first (§2.2); None = no request."""
    return [container_request(c, config) for c in _init_containers(pod) + _containers(pod)]


def resolve_memreq(request, device):
    """Memory a request takes on a concrete device (§2.2, end)."""
    if request.mem > 0:
        return request.mem
    if request.pct != PCT_UNSET:
        return device.devmem * request.pct // 100
    return 0


# ---------------------------------------------------------------------------------------------
# §3.2 / §3.4 node registration


def decode_node(node):
    """A registered :class:`Node`, or None when the node is not registered for NVIDIA."""
    annotations = _annotations(node)
    try:
        devices = _decode_register(annotations[REGISTER])
        pair_scores = _decode_pair_scores(annotations.get(PAIR_SCORES))
    except (KeyError, TypeError, ValueError):
        return None
    if not devices:
        return None
    cordoned = frozenset(_tokens(annotations.get(DEVICE_CORDON) or ""))
    return Node(_metadata(node).get("name"), devices, pair_scores, cordoned)


def _field(obj, key, kind, default):
    value = obj.get(key)
    if value is None:
        return default
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(key)
    if not isinstance(value, kind):
        raise TypeError(key)
    return value


def _decode_register(value):
    items = json.loads(value)
    if not isinstance(items, list):
        raise TypeError("register annotation is not a JSON array")
    return [_decode_device(pos, item) for pos, item in enumerate(items)]


def _decode_device(pos, item):
    if not isinstance(item, dict):
        raise TypeError("device is not a JSON object")
    return Device(
        pos=pos,
        id=_field(item, "id", str, ""),
        count=_field(item, "count", int, 0),
        devmem=_field(item, "devmem", int, 0),
        devcore=_field(item, "devcore", int, 0),
        type=_field(item, "type", str, ""),
        numa=_field(item, "numa", int, 0),
        mode=_field(item, "mode", str, ""),
        health=_field(item, "health", bool, False),
    )


def _decode_pair_scores(value):
    """§3.4: uuid -> {peer: score}; the first entry for a uuid wins."""
    if value is None:
        return {}
    items = json.loads(value)
    if not isinstance(items, list):
        raise TypeError("pair score annotation is not a JSON array")
    scores = {}
    for item in items:
        if not isinstance(item, dict):
            raise TypeError("pair score entry is not a JSON object")
        peers = _field(item, "score", dict, {})
        if any(isinstance(s, bool) or not isinstance(s, int) for s in peers.values()):
            raise TypeError("pair score is not an integer")
        scores.setdefault(_field(item, "uuid", str, ""), peers)
    return scores


# ---------------------------------------------------------------------------------------------
# §4.2 device list encoding, §4.3 usage reconstruction


def encode_pod_devices(slots):
    """§4.2: one ``;``-terminated entry per container slot."""
    return "".join("".join(f"{e.uuid},{NVIDIA},{e.mem},{e.cores}:" for e in slot) + ";" for slot in slots)


def decode_pod_devices(value):
    """§4.2 decoder: list of slots of :class:`Entry`; None when malformed."""
    slots = []
    for slot_text in value.split(";"):
        slot = []
        for device_text in slot_text.split(":"):
            if "," not in device_text:
                continue
            fields = device_text.split(",")
            if len(fields) < 4 or not _is_int32(fields[2]) or not _is_int32(fields[3]):
                return None
            slot.append(Entry(fields[0], int(fields[2]), int(fields[3])))
        slots.append(slot)
    return slots


def _is_int32(text):
    return re.fullmatch(r"[+-]?[0-9]+", text) is not None and -(2**31) <= int(text) <= MAX_INT32


def collapse(slots, n_init, init_released=False):
    """§4.3: per GPU UUID, the pod's usage as one :class:`Usage` (used = slots)."""
    init_peak = {}  # uuid -> Usage(used=1, mem=max, cores=max)
    app_sum = {}  # uuid -> Usage(used=entries, mem=sum, cores=sum)
    for index, slot in enumerate(slots):
        for entry in slot:
            if index < n_init:
                peak = init_peak.setdefault(entry.uuid, Usage(used=1))
                peak.mem = max(peak.mem, entry.mem)
                peak.cores = max(peak.cores, entry.cores)
            else:
                total = app_sum.setdefault(entry.uuid, Usage())
                total.used += 1
                total.mem += entry.mem
                total.cores += entry.cores
    if init_released:
        return app_sum
    result = {}
    for uuid in list(init_peak) + [u for u in app_sum if u not in init_peak]:
        peak, total = init_peak.get(uuid, Usage()), app_sum.get(uuid, Usage())
        result[uuid] = Usage(
            used=max(peak.used, total.used, 1),
            mem=max(peak.mem, total.mem),
            cores=max(peak.cores, total.cores),
        )
    return result


def _init_released(pod):
    """Every init container (at least one) terminated with exit code 0 (§4.3)."""
    init_containers = _init_containers(pod)
    if not init_containers:
        return False
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("initContainerStatuses") or []}
    for container in init_containers:
        state = (statuses.get(container.get("name")) or {}).get("state") or {}
        terminated = state.get("terminated")
        if not terminated or terminated.get("exitCode") != 0:
            return False
    return True


def counted_pods(pods, skip_uid):
    """``(pod, node name, collapsed usage)`` for every pod that holds GPU usage."""
    for pod in pods:
        annotations = _annotations(pod)
        if VGPU_NODE not in annotations or ALLOCATED not in annotations:
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if skip_uid and _metadata(pod).get("uid") == skip_uid:
            continue
        slots = decode_pod_devices(annotations[ALLOCATED])
        if slots is None:
            continue
        usage = collapse(slots, len(_init_containers(pod)), _init_released(pod))
        yield pod, annotations[VGPU_NODE], usage


def node_usage(node, holdings):
    """§9.2: per-device usage of one node (a list indexed by register position)."""
    usage = [Usage() for _ in node.devices]
    for _pod, node_name, collapsed in holdings:
        if node_name != node.name:
            continue
        for uuid, held in collapsed.items():
            pos = node.position(uuid)
            if pos is None:
                continue
            usage[pos].used += max(held.used, 1)
            usage[pos].mem += held.mem
            usage[pos].cores += held.cores
    return usage


def _copy_usage(usage):
    return [Usage(u.used, u.mem, u.cores) for u in usage]


# ---------------------------------------------------------------------------------------------
# §13 namespace quotas


def _namespace(obj):
    return _metadata(obj).get("namespace") or "default"


def quota_limits(quotas, namespace):
    """§13.1: ``{"mem": int, "cores": int}`` for the limits set on the namespace.

    Several ResourceQuota objects in one namespace: the smallest limit applies (Kubernetes
    enforces each quota on its own, and HAMi's quota manager keeps the minimum per resource).
    """
    limits = {}
    for quota in quotas:
        if _namespace(quota) != namespace:
            continue
        hard = (quota.get("spec") or {}).get("hard") or {}
        for key, name in ((QUOTA_MEM, "mem"), (QUOTA_CORES, "cores")):
            value = quantity_int(hard[key]) if key in hard else None
            if value is not None:
                limits[name] = min(value, limits.get(name, value))
    return limits


def quota_used(holdings, namespace):
    used = {"mem": 0, "cores": 0}
    for pod, _node, collapsed in holdings:
        if _namespace(pod) == namespace:
            used["mem"] += sum(u.mem for u in collapsed.values())
            used["cores"] += sum(u.cores for u in collapsed.values())
    return used


def quota_exceeded(ctx, slots):
    """§13.3: would this hypothetical allocation of the pod exceed the namespace limits?"""
    collapsed = collapse(slots, ctx.n_init).values()
    wanted = {"mem": sum(u.mem for u in collapsed), "cores": sum(u.cores for u in collapsed)}
    return any(ctx.quota_used[k] + wanted[k] > limit for k, limit in ctx.quota_limit.items())


# ---------------------------------------------------------------------------------------------
# §10 scores and device order


def parse_weights(value):
    """``slot=<int>,core=<int>,memory=<int>`` (spaces around keys and numbers allowed).

    Returns (slot, core, memory), or None when invalid.
    """
    if value is None:
        return (1, 1, 1)
    weights = {}
    for part in value.split(","):
        key, sep, number = part.partition("=")
        key, number = key.strip(), number.strip()
        if not sep or key not in ("slot", "core", "memory") or key in weights:
            return None
        if re.fullmatch(r"[+-]?[0-9]+", number) is None or int(number) < 0:
            return None
        weights[key] = int(number)
    if len(weights) != 3 or not any(weights.values()):
        return None
    return (weights["slot"], weights["core"], weights["memory"])


def device_score(device, usage, request, weights):
    """§10.1, request terms only when the device type is exactly "NVIDIA" [quirk]."""
    if device.count == 0 or device.devcore == 0 or device.devmem == 0:
        return 0.0
    r = c = m = 0
    if device.type == NVIDIA:
        r = 1
        c = request.cores
        m = device.devmem * request.pct // 100 if request.pct not in (0, PCT_UNSET) else request.mem
    w_slot, w_core, w_mem = weights
    return WEIGHT * (
        w_slot * (r + usage.used) / device.count
        + w_core * (c + usage.cores) / device.devcore
        + w_mem * (m + usage.mem) / device.devmem
    )


def node_score(node, usage):
    """§10.3 over all devices of the node, before the pod is placed."""
    count = sum(d.count for d in node.devices)
    total_core = sum(d.devcore for d in node.devices)
    total_mem = sum(d.devmem for d in node.devices)
    if count == 0 or total_core == 0 or total_mem == 0:
        return 0.0
    used = sum(u.used for u in usage)
    used_cores = sum(u.cores for u in usage)
    used_mem = sum(u.mem for u in usage)
    return 10.0 * (used / count + used_cores / total_core + used_mem / total_mem)


def sort_key(policy, numa_bind):
    """§10.2: a key function over ``(score, numa, used)``; the sort is stable over register order."""
    if "," not in policy and policy != "numa":
        if policy == "mutex":
            return lambda score, numa, used: (-used, numa)
        if numa_bind and policy == "binpack":
            return lambda score, numa, used: (-numa, score)
        if numa_bind:
            return lambda score, numa, used: (numa, -score)
        if policy == "binpack":
            return lambda score, numa, used: (score, numa)
        return lambda score, numa, used: (-score, numa)
    keys = chain_keys(policy, numa_bind)
    parts = {
        "binpack": lambda score, numa: score,
        "spread": lambda score, numa: -score,
        "numa": lambda score, numa: numa,
    }
    return lambda score, numa, used: tuple(parts[k](score, numa) for k in keys)


def chain_keys(policy, numa_bind):
    """Sort keys of a comma chain (or bare ``numa``), deduplicated; numa first under numa-bind."""
    keys = []
    for token in policy.split(","):
        token = token.strip()
        if token in ("binpack", "spread", "numa") and token not in keys:
            keys.append(token)
    if not keys:
        keys = ["spread"]
    if numa_bind and keys[0] != "numa":
        keys = ["numa"] + [k for k in keys if k != "numa"]
    return keys


def sorted_devices(node, usage, request, ctx):
    """The node's devices in GPU-policy order (Fit walks it backwards)."""
    key = sort_key(ctx.gpu_policy, ctx.numa_bind)

    def device_key(device):
        score = device_score(device, usage[device.pos], request, ctx.weights)
        return key(score, device.numa, usage[device.pos].used)

    return sorted(node.devices, key=device_key)


# ---------------------------------------------------------------------------------------------
# §9.4 Fit


def gen_reason(reasons, total):
    """``"<count>/<total> <Reason>"`` entries, sorted as strings, joined with ", "."""
    return ", ".join(sorted(f"{count}/{total} {reason}" for reason, count in reasons.items()))


def static_reason(device, node, ctx):
    """Checks 1-3 of §9.4 (they do not depend on usage). MIG-mode devices are out of scope."""
    if not device.health:
        return CARD_NOT_HEALTH
    if device.id in node.cordoned:
        return CARD_CORDONED
    if not _type_allowed(device, ctx.annotations):
        return CARD_TYPE_MISMATCH
    return ""


def _type_allowed(device, annotations):
    card_type = device.type.lower()
    use = _tokens(annotations.get(USE_GPUTYPE) or "")
    if use and not any(token.lower() in card_type for token in use):
        return False
    nouse = _tokens(annotations.get(NOUSE_GPUTYPE) or "")
    if any(token.lower() in card_type for token in nouse):
        return False
    if VGPU_MODE in annotations and device.mode not in annotations[VGPU_MODE]:
        return False
    return device.mode != "mig"


def _uuid_allowed(device, annotations):
    use = _tokens(annotations.get(USE_GPUUUID) or "")
    if use and device.id not in use:
        return False
    return device.id not in _tokens(annotations.get(NOUSE_GPUUUID) or "")


def usage_reason(device, usage, memreq, cores, ctx, hypothetical):
    """Checks 5-12 of §9.4 for one device; ``hypothetical`` = the pod's slots if it is taken."""
    if not _uuid_allowed(device, ctx.annotations):
        return CARD_UUID_MISMATCH
    if device.count <= usage.used:
        return TIME_SLICING_EXHAUSTED
    if ctx.mutex and usage.used > 0:
        return EXCLUSIVE_CONFLICT
    if quota_exceeded(ctx, hypothetical):
        return QUOTA_NOT_FIT
    if device.devmem - usage.mem < memreq:
        return INSUFFICIENT_MEMORY
    if device.devcore - usage.cores < cores:
        return INSUFFICIENT_CORE
    if device.devcore == 100 and cores == 100 and usage.used > 0:
        return EXCLUSIVE_CONFLICT
    if device.devcore != 0 and usage.cores == device.devcore and cores == 0:
        return COMPUTE_EXHAUSTED
    return ""


def fit_container(node, usage, request, ctx, slots, index):
    """§9.4 for container ``index``; ``slots`` holds the entries chosen for earlier containers.

    Returns ``(entries, "")`` on success, ``(None, reason)`` on failure.
    """
    type_devices = [d for d in sorted_devices(node, usage, request, ctx) if "nvidia" in d.type.lower()]
    if request.nums > len(type_devices):
        return None, NODE_INSUFFICIENT_DEVICE
    need = origin = request.nums
    prev_numa = -1
    picked = []
    reasons = Counter()
    cores = min(request.cores, 100)
    for device in reversed(type_devices):
        reason = static_reason(device, node, ctx)
        if reason:
            reasons[reason] += 1
            continue
        if ctx.numa_bind and device.numa != prev_numa:
            if need != origin:
                reasons[NUMA_NOT_FIT] += len(picked)
            need, picked, prev_numa = origin, [], device.numa
        entry = Entry(device.id, resolve_memreq(request, device), cores)
        hypothetical = slots[:index] + [picked + [entry]]
        reason = usage_reason(device, usage[device.pos], entry.mem, cores, ctx, hypothetical)
        if reason:
            reasons[reason] += 1
            continue
        if need > 0:
            picked.append(entry)
            if not ctx.topology:
                need -= 1
        if need == 0 and not ctx.topology:
            return picked, ""
    if ctx.topology and len(picked) >= origin:
        return topology_choice(node, picked, origin), ""
    if picked:
        reasons[NOT_ENOUGH_PICKED] = len(picked)
    return None, gen_reason(reasons, len(type_devices))


def pair_score(node, a, b):
    return node.pair_scores.get(a.uuid, {}).get(b.uuid, 0)


def topology_choice(node, picked, origin):
    """§9.4 end: choose ``origin`` of the eligible cards by pair scores."""
    if len(picked) == origin:
        return picked
    if origin == 1:
        links = [sum(pair_score(node, c, o) for o in picked if o is not c) for c in picked]
        return [picked[links.index(min(links))]]
    best, best_sum = None, None
    for combo in itertools.combinations(picked, origin):
        total = sum(pair_score(node, a, b) for a, b in itertools.combinations(combo, 2))
        if best_sum is None or total > best_sum:
            best, best_sum = list(combo), total
    return best


def take(node, usage, entries):
    """Add a container's devices to the node usage (§9.3 fitInDevices step e)."""
    for entry in entries:
        u = usage[node.position(entry.uuid)]
        u.used += 1
        u.mem += entry.mem
        u.cores += entry.cores


def fit_node(node, base_usage, requests, ctx):
    """§9.3: ``(slots, "")`` when every container fits, else ``(None, first reason)``."""
    slots = [[] for _ in requests]
    for index in range(ctx.n_init):
        if requests[index] is not None:
            entries, reason = fit_container(node, _copy_usage(base_usage), requests[index], ctx, slots, index)
            if entries is None:
                return None, reason
            slots[index] = entries
    app_usage = _copy_usage(base_usage)
    for index in range(ctx.n_init, len(requests)):
        if requests[index] is not None:
            entries, reason = fit_container(node, app_usage, requests[index], ctx, slots, index)
            if entries is None:
                return None, reason
            take(node, app_usage, entries)
            slots[index] = entries
    return slots, ""


# ---------------------------------------------------------------------------------------------
# §9.1 top level


def _result(node=None, annotations=None, failed=None, scores=None, error=""):
    return {
        "node": node,
        "annotations": annotations or {},
        "failed": failed or {},
        "scores": scores or {},
        "error": error,
    }


def explain(nodes, pods, quotas, pod, now, node_policy=None, gpu_policy=None, config=Config()):
    """Where would ``pod`` go? Same JSON object as ``Cluster.explain`` (see module docstring)."""
    pod = apply_webhook_defaults(pod)
    requests = pod_requests(pod, config)
    if all(r is None for r in requests):
        return _result(error="pod requests no NVIDIA device")
    annotations = _annotations(pod)
    weights = parse_weights(annotations.get(SCORING_WEIGHTS))
    if weights is None:
        return _result(error=f"invalid {SCORING_WEIGHTS}: {annotations[SCORING_WEIGHTS]!r}")
    node_policy = annotations.get(NODE_POLICY, node_policy or "binpack")
    namespace = _namespace(pod)
    holdings = list(counted_pods(pods, _metadata(pod).get("uid")))
    ctx = PodContext(
        annotations=annotations,
        namespace=namespace,
        n_init=len(_init_containers(pod)),
        gpu_policy=annotations.get(GPU_POLICY, gpu_policy or "spread"),
        weights=weights,
        quota_limit=quota_limits(quotas, namespace),
        quota_used=quota_used(holdings, namespace),
    )
    by_name = {_metadata(n).get("name"): n for n in nodes}
    failed, scores, placements = {}, {}, {}
    for name in sorted(by_name):
        node = decode_node(by_name[name])
        if node is None:
            failed[name] = NODE_UNREGISTERED
            continue
        usage = node_usage(node, holdings)
        slots, reason = fit_node(node, usage, requests, ctx)
        if slots is None:
            failed[name] = reason
            continue
        scores[name] = node_score(node, usage)
        placements[name] = slots
    if not placements:
        return _result(failed=failed)
    chosen = pick_node(scores, node_policy)
    encoded = encode_pod_devices(placements[chosen])
    result_annotations = {VGPU_NODE: chosen, VGPU_TIME: str(now), TO_ALLOCATE: encoded, ALLOCATED: encoded}
    return _result(chosen, result_annotations, failed, scores)


def pick_node(scores, node_policy):
    """spread -> lowest score, anything else -> highest; ties -> smallest name."""
    if node_policy == "spread":
        return min(scores, key=lambda name: (scores[name], name))
    return min(scores, key=lambda name: (-scores[name], name))

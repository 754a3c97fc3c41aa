"""Hypothesis strategies for clusters of every vendor HAMi v2.10 schedules, and pods asking them.

A case (`vendor_cases(family, partners)`) is the NVIDIA generator's shape (strategies.cases) plus
`vendors`: the backend families it involves. Each node registers the focus family exactly as that
vendor's device plugin does (vendor_specs.py names each key and format with HAMi's file:line), now
and then beside a partner family (mixed-vendor nodes, e.g. NVIDIA + Hygon); resident pods hold
devices through each vendor's allocated annotation; devices may be unhealthy, registrations
malformed or stale; the new pod asks the focus family (sometimes a partner too) with every resource,
default, pinning and policy annotation that backend reads, sizes that need defaults or do not fit.

Resident device lists are written positionally (one slot per container, empty for containers that
ask nothing): HAMi and hami_fast must read those the same way, while HAMi misreads unpadded lists of
backends keyed by model name (docs/compatibility.md), a kept difference modelled for NVIDIA only.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from hypothesis import strategies as st

from hamigen import sgpu
from hamigen import strategies as nvidia
from hamigen.vendor_specs import (
    ASCEND_MODE,
    ASCEND_NODE_MODE,
    CAMBRICON_LOCK,
    FAMILIES,
    METAX_TOPOLOGY,
    NEURON_INSTANCE_TYPES,
    Backend,
)

NAMESPACES = nvidia.NAMESPACES


def one_in(draw, n: int) -> bool:
    """True about once in `n` draws; hypothesis' simplest draw is False."""
    return draw(st.sampled_from([False] * (n - 1) + [True]))


# --- nodes -------------------------------------------------------------------------------------


def device_prefix(b: Backend) -> str:
    return b.common_word.split("-")[0].lower()


def device_id(b: Backend, node: str, i: int) -> str:
    """The ID of device `i` of `b` on `node`: HAMi's own for capacity backends, ours otherwise."""
    return b.derived_id.format(node=node, i=i) if b.derived_id else f"{device_prefix(b)}-{node}-{i}"


@st.composite
def ascend_devices(draw, b: Backend, node: str) -> list[dict[str, Any]]:
    """NPUs as HAMi's Ascend plugin registers them (register.go): index i, its CommonWord as type,
    numa 0, `custominfo.NetworkID` on Ascend910* chips (0 up to index 3, then 1; 0 on the 910C),
    here also in other groups, missing on one NPU, not a number, or absent."""
    n = draw(st.sampled_from([1, 2, 4, 4, 6, 8, 8, 8]))
    model = draw(st.sampled_from(list(b.models[:-1]) * 4 + list(b.models[-1:])))
    count = draw(st.sampled_from([1, 4, 7]))
    networks = draw(st.sampled_from(["plugin"] * 3 + ["groups"] * 3 + ["none", "partial", "string"]))
    if not b.common_word.startswith("Ascend910") and draw(st.booleans()):
        networks = "none"
    out = []
    for i in range(n):
        d: dict[str, Any] = {
            "id": device_id(b, node, i),
            "index": i,
            "count": count,
            "devmem": model[1],
            "devcore": model[2],
            "type": model[0],
            "numa": 0,
            "health": not one_in(draw, 9),
        }
        plugin_id = 0 if b.common_word == "Ascend910C" or i <= 3 else 1
        network: Any = plugin_id if networks != "groups" else draw(st.sampled_from([0, 1, 2]))
        if networks == "string" and i == 0:
            network = str(network)
        if networks != "none" and not (networks == "partial" and i == n - 1):
            d["custominfo"] = {"NetworkID": network}
        out.append(d)
    return out


@st.composite
def listed_devices(draw, b: Backend, node: str) -> list[dict[str, Any]]:
    """Devices of a backend that registers a list (JSON or colon/comma)."""
    if b.family == "ascend":
        return draw(ascend_devices(b, node))
    n = draw(st.sampled_from(XPU_CARDS if b.common_word == "XPU" else [1, 1, 2, 2, 3, 4, 4, 8]))
    # The last model of a backend is a type without the vendor's word (HAMi never offers it): rarer.
    weighted = list(b.models[:-1]) * 3 + list(b.models[-1:])
    model = draw(st.sampled_from(weighted))
    split = draw(st.sampled_from([1, 4, 10]))
    # Vastai: whole cards (no custominfo) or dies of cards (AIC); now and then a plugin's other
    # custominfo shapes, which HAMi's die mode and die-mode score read differently.
    strategy = draw(st.sampled_from(VASTAI_STRATEGIES)) if b is FAMILIES["vastai"][0] else "card"
    per_card = draw(st.sampled_from([1, 2, 4]))
    out = []
    for i in range(n):
        this = draw(st.sampled_from(weighted)) if one_in(draw, 6) else model
        d: dict[str, Any] = {
            "id": device_id(b, node, i),
            "index": i,
            "count": draw(st.sampled_from([split, split, split, 1])),
            "devmem": this[1],
            "devcore": this[2],
            "type": this[0],
            "numa": draw(st.sampled_from([0, 0, i % 2])),
            "mode": "hami-core",
            "health": not one_in(draw, 10),
        }
        if strategy != "card":
            d["custominfo"] = vastai_info(draw, strategy, str(i // per_card))
        out.append(d)
    return out


# Kunlunxin's graph is of eight cards: mostly eight, now and then fewer or more.
XPU_CARDS = [8, 8, 8, 8, 4, 6, 2, 1, 10]

VASTAI_STRATEGIES = ["card"] * 4 + ["die"] * 4 + ["named-card", "aic-only"]


def vastai_info(draw, strategy: str, card: str) -> dict[str, Any]:
    """A Vastai device's custominfo (vastai/device.go: DeviceStrategy and AIC); a die without its
    card now and then (HAMi's combination leaves it out)."""
    if strategy == "named-card":
        return {"DeviceStrategy": "card", "AIC": card}
    if strategy == "aic-only":
        return {"AIC": card}
    return {"DeviceStrategy": "die"} if one_in(draw, 15) else {"DeviceStrategy": "die", "AIC": card}


def colon_encoded(devs: list[dict[str, Any]], short: list[bool]) -> str:
    """HAMi's colon/comma registration (devices.go:391-417); `short` devices with 7 fields."""
    parts = []
    for d, seven in zip(devs, short, strict=True):
        fields = [d["id"], d["count"], d["devmem"], d["devcore"], d["type"], d["numa"], str(d["health"]).lower()]
        if not seven:
            fields += [d["index"], d["mode"]]
        parts.append(",".join(str(f) for f in fields) + ":")
    return "".join(parts)


def handshake(draw, key: str, now: int) -> dict[str, str]:
    # A fresh "Requesting_" stamp: a HAMi that starts now does not register the node until the
    # plugin answers (sched/scheduler.go:523-525).
    kind = draw(st.sampled_from(["none", "none", "none", "reported", "reported", "fresh", "stale", "garbage"]))
    return {} if kind == "none" else {key: nvidia.handshake_value(kind, now)}


@st.composite
def listed_registration(draw, b: Backend, node: str, now: int) -> tuple[dict, dict, dict, list]:
    """Annotations, capacity, allocatable and the devices HAMi will see, for a JSON or colon backend."""
    devs = draw(listed_devices(b, node))
    state = draw(st.sampled_from(["ok"] * 24 + ["missing", "malformed", "empty"]))
    ann: dict[str, str] = {}
    if b.registration == "json":
        body = json.dumps(devs, separators=(",", ":"))
        if one_in(draw, 6):  # an older plugin: no index, health left out when false
            body = json.dumps([{k: v for k, v in d.items() if k != "index" and v is not False} for d in devs])
        ann[b.register_key] = {"ok": body, "malformed": body[:-3], "empty": "[]"}.get(state, body)
    else:
        short = [one_in(draw, 5) for _ in devs]
        body = colon_encoded(devs, short)
        ann[b.register_key] = {"ok": body, "malformed": body.replace(",", ";", 1), "empty": ":"}.get(state, body)
    if state == "missing":
        del ann[b.register_key]
    if b.handshake_key:
        ann.update(handshake(draw, b.handshake_key, now))
    total = sum(d["count"] for d in devs)
    allocatable = {b.count: draw(st.sampled_from([str(total)] * 8 + ["0", None]))}
    capacity = dict(allocatable)
    if b.family == "amd" and one_in(draw, 7):
        capacity[b.count] = draw(st.sampled_from(["0", None]))  # AMD's health is status.capacity
    seen = devs if state == "ok" else []
    return ann, capacity, allocatable, seen


@st.composite
def capacity_registration(
    draw, b: Backend, node: str, now: int, neuron_cores: int = 2
) -> tuple[dict, dict, dict, list]:
    """Backends whose devices HAMi derives from `status.capacity` (vendor_specs: registration)."""
    cards = draw(st.sampled_from([0, 1, 2, 2, 4, 4, 8]))
    ann: dict[str, str] = {}
    if b.family == "neuron":
        capacity, devs = neuron_capacity(draw, b, node, neuron_cores)
    elif b.family == "metax":
        capacity = {b.count: str(cards)}
        devs = [device_on(b.derived_id.format(node=node, i=i), i, 65536) for i in range(cards)]
        for key in METAX_TOPOLOGY:
            if one_in(draw, 3):
                table = {str(k): draw(st.sampled_from([0, 10, 50, 100, 300])) for k in (1, 2, 4, 8)}
                ann[key] = draw(st.sampled_from([json.dumps(table), json.dumps(table), "{bad", "{}"]))
    elif b.common_word == "kunlun":
        cards = draw(st.sampled_from([*XPU_CARDS, 0]))
        capacity = {b.count: str(cards)}
        devs = [device_on(b.derived_id.format(node=node, i=i), i, 98304) for i in range(cards)]
    elif b.family == "enflame":
        capacity = {b.count: str(cards)}
        devs = [device_on(b.derived_id.format(node=node, i=i), i, 100) for i in range(cards)]
    elif b.family == "mthreads":
        cores = cards * 16 + draw(st.sampled_from([0, 0, 0, 8]))
        memory = draw(st.sampled_from([96, 96, 64, 48])) * cards
        capacity = {b.cores: str(cores), b.memory: str(memory), b.count: str(cards * 100)}
        per = memory * 512 * 16 // cores if cores else 0
        devs = [device_on(b.derived_id.format(node=node, i=i), i, per) for i in range(-(-cores // 16))]
    else:  # cambricon
        vcore = cards * 100 + draw(st.sampled_from([0, 0, 0, 50]))
        vmemory = draw(st.sampled_from([64, 96, 128])) * cards
        capacity = {b.cores: str(vcore), b.memory: str(vmemory), b.count: str(cards * 100)}
        per = vmemory * 256 * 100 // vcore if vcore else 0
        devs = [device_on(b.derived_id.format(node=node, i=i), i, per) for i in range(-(-vcore // 100))]
        lock = draw(st.sampled_from(["none"] * 5 + ["fresh", "stale", "garbage"]))
        if lock != "none":
            ann[CAMBRICON_LOCK] = lock_value(lock, now)
    if one_in(draw, 9):
        capacity = {}  # the device plugin is gone
        devs = []
    return ann, capacity, dict(capacity), devs


# Devices per Neuron node (trn1.32xlarge and inf1.24xlarge have 16: HAMi's pdqsort then).
NEURON_DEVICES = [1, 2, 4, 4, 8, 8, 12, 16, 16, 0]


def neuron_capacity(draw, b: Backend, node: str, cores_per_device: int) -> tuple[dict, list]:
    """AWS Neuron's count and core capacities: `cores_per_device` is the case's (HAMi takes the
    first node's for every node, hami-fast each node's own: one value per case compares like with
    like); a remainder below the count now and then (HAMi divides rounding down)."""
    count = draw(st.sampled_from(NEURON_DEVICES))
    remainder = draw(st.sampled_from([0, 0, 0, 1])) if count > 1 else 0
    capacity: dict[str, str | None] = {b.count: str(count), b.cores: str(cores_per_device * count + remainder)}
    if cores_per_device == 0 and one_in(draw, 2):
        capacity[b.cores] = None  # no core capacity at all: no cores either
    if one_in(draw, 25):
        capacity[b.count] = "1500m"  # no integer: HAMi finds no devices
        return capacity, []
    devs = [device_on(b.derived_id.format(node=node, i=i), i, 0) for i in range(count)]
    return capacity, devs


# Enflame DRS profile sets (name -> id): the chart's example, twins (equal slices and memory under
# other spellings: HAMi picks one in Go's map order), equal slices with more memory, names that do
# not parse, a smaller card.
DRS_PROFILES = [
    {"1g.6gb": "0", "3g.20gb": "1", "6g.40gb": "2"},
    {"1g.6gb": "0", "3g.20gb": "1", "6g.40gb": "2"},
    {"1g.6gb": "0", "3g.20gb": "1", "3G.20GB": "5", "6g.40gb": "2"},
    {"1g.6gb": "0", "2g.12gb": "3", "3g.24gb": "4", "3g.20gb": "1", "6g.40gb": "2"},
    {"1g.6gb": "0", "3g.20": "6", " 3g.20gb ": "1", "6g.40gb": "2", "bad": "9", "8g.xgb": "8"},
    {"1g.10gb": "a", "2g.20gb": "b", "2g.20GB": "", "4g.40gb": "c"},
    {"2g.16gb": "p", "4g.32gb": "q", "0g.4gb": "z"},
]


@st.composite
def drs_registration(draw, b: Backend, node: str) -> tuple[dict, dict, dict, list]:
    """Enflame DRS's capacity annotation: devices (index, minor, capacity in slices) and profiles;
    now and then a flaw that drops the node's devices (a capacity of 0, a number where a string
    goes, no valid profile), or the annotation missing or cut short."""
    profiles = dict(draw(st.sampled_from(DRS_PROFILES)))
    slices = max(parse_drs_profile(name)[0] for name in profiles)
    n = draw(st.sampled_from([1, 1, 2, 2, 3, 4, 8, 13]))
    offset = 4 if one_in(draw, 8) else 0
    capacity = draw(st.sampled_from([slices] * 4 + [1, 1, 2, 3]))
    devices = []
    for i in range(n):
        index = i + offset
        d: dict[str, Any] = {"index": draw(st.sampled_from([str(index)] * 6 + [f"0{index}"])), "minor": str(i)}
        if not offset and one_in(draw, 6):
            # HAMi takes the position for an index that is no integer; a negative one stays (unsigned)
            d["index"] = draw(st.sampled_from([None, "x", " 1", "-1" if i == n - 1 else None]))
        if one_in(draw, 6):
            d["minor"] = draw(st.sampled_from([None, "", f" {i + 40} "]))
        d["capacity"] = draw(st.sampled_from([capacity] * 6 + [str(capacity), capacity + 0.5]))
        devices.append({k: v for k, v in d.items() if v is not None})
    state = draw(st.sampled_from(["ok"] * 20 + ["missing", "cut", "zero", "number", "no-profiles", "null"]))
    if state == "zero":
        devices[-1]["capacity"] = draw(st.sampled_from([0, "0", -2, "x", None]))
    if state == "number":
        devices[0]["index"] = 0
    if state == "no-profiles":
        profiles = draw(st.sampled_from([{}, {"bad": "0"}, {"x.6gb": "1"}]))
    body = json.dumps({"devices": devices, "profiles": profiles})
    ann = {} if state == "missing" else {b.register_key: {"cut": body[:-5], "null": "null"}.get(state, body)}
    memory = max(parse_drs_profile(p)[1] for p in profiles) if profiles else 0
    devmem = (memory or slices) * 1024
    indexes = [int(d["index"]) if GO_INT.fullmatch(d.get("index") or "") else i for i, d in enumerate(devices)]
    seen = [device_on(b.derived_id.format(node=node, i=index), index, devmem) for index in indexes]
    return ann, {}, {}, seen if state == "ok" else []


def parse_drs_profile(name: str) -> tuple[int, int]:
    """HAMi's parseProfile: `<slices>[g].<GB>[gb]`, case and spaces ignored; (0, 0) when the slices
    do not parse, GB 0 when only they do."""
    parts = name.strip().lower().split(".")
    if len(parts) < 2:
        return 0, 0
    size, memory = parts[0].strip().removesuffix("g"), parts[1].strip().removesuffix("gb")
    if not GO_INT.fullmatch(size):
        return 0, 0
    return int(size), int(memory) if GO_INT.fullmatch(memory) else 0


GO_INT = re.compile(r"[+-]?[0-9]+")


def device_on(uuid: str, index: int, devmem: int) -> dict[str, Any]:
    return {"id": uuid, "index": index, "devmem": devmem, "type": "", "health": True}


def lock_value(kind: str, now: int) -> str:
    if kind == "garbage":
        return "yesterday"
    age = 30 if kind == "fresh" else 3600
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - age))


def registration(b: Backend, node: str, now: int, neuron_cores: int = 2) -> st.SearchStrategy:
    if b.registration == "drs":
        return drs_registration(b, node)
    if b.registration == "capacity":
        return capacity_registration(b, node, now, neuron_cores)
    if b.registration == "sgpu":
        return sgpu.registration(b, node, now)
    return listed_registration(b, node, now)


@st.composite
def vendor_node(
    draw, name: str, backends: list[Backend], now: int, neuron_cores: int = 2
) -> tuple[dict, dict[str, list]]:
    """One node registering `backends`: the Node object and the devices HAMi sees per backend."""
    ann: dict[str, str] = {}
    labels: dict[str, str] = {}
    capacity: dict[str, str] = {"cpu": "8", "memory": "32Gi"}
    allocatable = dict(capacity)
    seen: dict[str, list] = {}
    for b in backends:
        if b.family == "nvidia":
            obj, devs = draw(nvidia.node(name, now))
            ann.update(obj["metadata"]["annotations"])
            allocatable.update(obj["status"]["allocatable"])
            capacity.update(obj["status"]["allocatable"])
        else:
            a, cap, alloc, devs = draw(registration(b, name, now, neuron_cores))
            ann.update(a)
            capacity.update({k: v for k, v in cap.items() if v is not None})
            allocatable.update({k: v for k, v in alloc.items() if v is not None})
        seen[b.common_word] = devs
    if any(b.family == "ascend" for b in backends) and not one_in(draw, 4):
        ann[ASCEND_NODE_MODE] = draw(st.sampled_from(["true", "false", "false"]))
    if any(b.family == "neuron" for b in backends) and not one_in(draw, 5):
        labels["node.kubernetes.io/instance-type"] = draw(st.sampled_from(NEURON_INSTANCE_TYPES))
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": ann, **({"labels": labels} if labels else {})},
        "status": {"capacity": capacity, "allocatable": allocatable},
    }
    return obj, seen


# --- resident pods -----------------------------------------------------------------------------


def slot_type(b: Backend, uuid: str, devs: list[dict[str, Any]]) -> str:
    """The Type HAMi writes in a pod's list: the CommonWord, AMD's the device's own type."""
    if b.family != "amd":
        return b.common_word
    return next((d["type"] for d in devs if d["id"] == uuid), "AMD")


# Cores a resident holds per device: AMD's are compute units (a card has 104 to 304 of them).
RESIDENT_CORES = {
    "amd": [0, 0, 10, 52, 100, 104, 200, 304],
    "neuron": [1, 2, 3, 3, 0, 15, 7],
    "enflame-drs": [17, 50, 100, 100, 0, 60, 90],
}
# Memory a resident holds per device, by backend: Kunlunxin's vXPU slices come in three sizes (a
# card holding slices of two sizes takes no more).
RESIDENT_MEMORY = {
    "XPU": [24576, 24576, 49152, 98304, 1024],
    "kunlun": [98304, 98304, 0],
    "AWSNeuron": [0, 0, 0, 1024],
    "Enflame": [6144, 6144, 20480, 40960, 40960, 1024],  # DRS profiles' MiB
}


@st.composite
def vendor_resident(draw, i: int, b: Backend, node: str, devs: list[dict[str, Any]]) -> dict[str, Any]:
    """A pod HAMi placed earlier, holding devices of `b` through its allocated annotation."""
    n_app = draw(st.integers(1, 3))
    uuids = [d["id"] for d in devs] or [device_id(b, node, 0)]
    slots, containers = [], []
    for c in range(n_app):
        uses = c == 0 or draw(st.booleans())
        res: dict[str, Any] = {}
        picks: list[str] = []
        if uses:
            k = draw(st.integers(1, min(2, len(uuids))))
            picks = draw(st.lists(st.sampled_from([*uuids, "gone-uuid"]), min_size=k, max_size=k, unique=True))
            res = {"limits": {b.count: str(len(picks))}}
        mem = draw(st.sampled_from(RESIDENT_MEMORY.get(b.common_word, [0, 1024, 4096, 8192, 16384, 65536])))
        cores = draw(st.sampled_from(RESIDENT_CORES.get(b.family, [0, 0, 10, 50, 100])))
        slots.append("".join(f"{u},{slot_type(b, u, devs)},{mem},{cores}:" for u in picks) + ";")
        containers.append({"name": f"c{c}", "image": "x", **({"resources": res} if res else {})})
    annotations = {"hami.io/vgpu-node": node, b.allocated: "".join(slots)}
    if b.to_allocate:
        annotations[b.to_allocate] = ";"
    if b.family == "metax-sgpu":
        annotations.update(draw(sgpu.resident_annotations()))
    if one_in(draw, 26):
        annotations[b.allocated] = draw(st.sampled_from([f"{uuids[0]},{b.common_word}:;", "x,y,lots,0:;"]))
    phase = draw(st.sampled_from(["Running"] * 6 + ["Pending", "Succeeded", "Failed"]))
    spec: dict[str, Any] = {"containers": containers}
    if not one_in(draw, 8):
        spec["nodeName"] = node  # else Filter assigned it and it is not bound yet
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"vres-{i}",
            "namespace": draw(st.sampled_from(NAMESPACES)),
            "uid": f"uid-vres-{i}",
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": phase},
    }


# --- the new pod -------------------------------------------------------------------------------


def amount(values: list[Any]) -> st.SearchStrategy[str | None]:
    return st.sampled_from(values).map(lambda v: None if v is None else str(v))


def limits_for(draw, b: Backend) -> dict[str, str]:
    """The resources one container asks of `b`, with values that need defaults or do not fit."""
    if b.family == "nvidia":
        res = draw(nvidia.container_resources(True))
        return dict(res.get("limits") or res.get("requests") or {})
    count = draw(amount([1, 1, 1, 1, 2, 2, 2, 3, 4, 0]))
    asked = {b.count: count}
    if b.family == "hygon":
        asked[b.memory] = draw(amount([None, None, 0, 1000, 4000, 16384, 40000, 70000]))
        asked[b.cores] = draw(amount([None, None, 0, 30, 50, 100, 150]))
    elif b.family == "iluvatar":
        asked[b.memory] = draw(amount([None, None, 0, 16, 64, 128, 300]))
        asked[b.cores] = draw(amount([None, None, 0, 30, 50, 100, 150]))
    elif b.family == "mthreads":
        asked[b.memory] = draw(amount([None, None, 2, 4, 8, 16, 32, 64, 96, 5, 200]))
        asked[b.cores] = draw(amount([None, None, 0, 4, 8, 16]))
    elif b.family == "cambricon":
        asked[b.memory] = draw(amount([None, None, 0, 10, 32, 64, 300]))
        asked[b.cores] = draw(amount([None, None, 0, 10, 50, 100, 150]))
    elif b.family == "kunlun":
        asked[b.count] = draw(amount([1, 1, 1, 1, 1, 2, 2, 2, 4, 4, 8, 3, 0]))
        if b.memory:
            sizes = [None, None, 0, 1000, 24576, 30000, 49152, 60000, 98304, 200000, "0.5", "1Gi"]
            asked[b.memory] = draw(amount(sizes))
    elif b.family == "neuron":
        asked.update(neuron_asks(draw, b))
    elif b.family == "enflame-drs":
        asked.update(drs_limits(draw, b))
    elif b.family == "amd":
        asked[b.memory] = draw(amount([None, None, 0, 8000, 32768, 65536, 300000]))
    elif b.family == "metax-sgpu":
        asked.update(sgpu.limits(draw, b))
    elif b.family == "ascend":
        asked[b.count] = draw(amount([1] * 6 + [2, 2, 2, 4, 4, 8, 3, 0]))
        sizes = [None] * 4 + [0, 1000, 3000, 3072, 6000, 8192, 9000, 16384, 17000, 32768, 40000, 65536, 70000]
        several = asked[b.count] not in ("0", "1")
        # Several NPUs need the whole card but in the soft split: mostly no memory then.
        asked[b.memory] = None if several and not one_in(draw, 4) else draw(amount(sizes))
        # Cores are refused outside the soft split: rare.
        asked[b.cores] = draw(amount([None] * 8 + [0, 5, 10, 50, 100, 150]))
        asked[b.cores] = draw(amount([None] * 8 + [1, 25, 50, 100, 100] * 2 + [0, 150]))
    return {k: v for k, v in asked.items() if v is not None}


def neuron_asks(draw, b: Backend) -> dict[str, str | None]:
    """Whole devices (counts that fit a run or not), cores (that split or not), or both (the count
    wins); values HAMi's webhook refuses now and then."""
    kind = draw(st.sampled_from(["devices", "devices", "cores", "cores", "cores", "both"]))
    odd = one_in(draw, 12)
    devices = draw(amount([1, 1, 1, 2, 2, 3, 4, 4, 8, 16])) if kind != "cores" else None
    cores = draw(amount([1, 1, 1, 2, 2, 3, 4, 6, 8])) if kind != "devices" else None
    if odd:  # refused by HAMi's webhook
        devices, cores = (draw(amount([0, "0.5"])), None) if kind != "cores" else (None, draw(amount([0, "1.5"])))
    return {b.count: devices, b.cores: cores}


def drs_limits(draw, b: Backend) -> dict[str, str | None]:
    """Enflame DRS: a profile by its slices (some no profile has, a count that is no integer or
    beyond int32), or by memory (GB, or MiB when large) and cores, or both (the count wins)."""
    mode = draw(st.sampled_from(["direct"] * 4 + ["spec"] * 4 + ["both", "odd"]))
    asked: dict[str, str | None] = {b.count: None}
    if mode in ("direct", "both"):
        asked[b.count] = draw(amount([1, 1, 1, 3, 3, 6, 2, 12, 0]))
    if mode == "odd":
        asked[b.count] = draw(amount(["0.5", "4Gi", "1Gi", -1]))
    if mode != "direct":
        asked[b.memory] = draw(amount([None, None, 6, 16, 20, 21, 40, 41, 81, 6144, 20480, 30000, 50000, 0]))
        asked[b.cores] = draw(amount([None, None, 17, 20, 50, 51, 100, 0, 150]))
    return asked


@st.composite
def vendor_container(draw, name: str, asks: list[Backend]) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "x"}
    limits: dict[str, str] = {}
    for b in asks:
        limits.update(limits_for(draw, b))
    if limits:
        where = draw(st.sampled_from(["limits"] * 10 + ["requests", "both"]))
        if where == "limits":
            c["resources"] = {"limits": limits}
        elif where == "requests":
            c["resources"] = {"requests": limits}
        else:
            c["resources"] = {"requests": limits, "limits": {k: v for k, v in limits.items() if draw(st.booleans())}}
    elif draw(st.booleans()):
        c["resources"] = {"limits": {"cpu": "1"}}
    if one_in(draw, 41):
        c["securityContext"] = {"privileged": True}
    return c


def pin_values(draw, uuids: list[str]) -> str:
    picks = draw(st.lists(st.sampled_from([*uuids, "gone-uuid"]), min_size=1, max_size=3, unique=True))
    return draw(st.sampled_from([",", ", "])).join(picks) + draw(st.sampled_from(["", "", ","]))


TYPE_WORDS = {
    "hygon": ["Z100", "K100", "DCU", "z100l,k100", " Z100 ", ""],
    "amd": ["MI300X", "mi210", "AMD", "MI300X,MI210", "Instinct", ""],
}


@st.composite
def vendor_annotations(draw, asks: list[Backend], uuids: dict[str, list[str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for b in asks:
        if b.family == "nvidia":
            out.update(draw(nvidia.pod_annotations(uuids.get("NVIDIA", []))))
            continue
        for key in b.type_keys:
            if one_in(draw, 5):
                out[key] = draw(st.sampled_from(TYPE_WORDS[b.family]))
        for key in b.uuid_keys:
            if one_in(draw, 5 if len(b.uuid_keys) <= 2 else 10):  # Kunlunxin's two pairs: as often in all
                out[key] = pin_values(draw, uuids.get(b.common_word) or [])
        for key in b.inert_keys:
            if one_in(draw, 9):
                out[key] = draw(
                    st.sampled_from(["x", uuids.get(b.common_word, ["x"])[0] if uuids.get(b.common_word) else "x"])
                )
    if any(b.family == "metax-sgpu" for b in asks):
        out.update(draw(sgpu.pod_annotations()))
    if any(b.family == "ascend" for b in asks) and draw(st.booleans()):
        out[ASCEND_MODE] = draw(st.sampled_from(["hami-core", "hami-core", "hami-core", "other"]))
    if one_in(draw, 6):
        out["hami.io/gpu-scheduler-policy"] = draw(st.sampled_from(["mutex", "binpack", "spread", "mutex,binpack"]))
    if one_in(draw, 6):
        out["hami.io/node-scheduler-policy"] = draw(st.sampled_from(["binpack", "spread"]))
    return out


@st.composite
def vendor_pod(draw, focus: list[Backend], partners: list[Backend], uuids: dict[str, list[str]]) -> dict[str, Any]:
    """The pod: its first container asks a focus backend, others ask it, a partner, or nothing."""
    first = draw(st.sampled_from(focus))
    both = partners and one_in(draw, 4)
    second = draw(st.sampled_from(partners)) if both else None
    app = [draw(vendor_container("c0", [first, second] if second and draw(st.booleans()) else [first]))]
    for i in range(1, draw(st.integers(1, 3))):
        pick = draw(st.sampled_from(["none", "none", "focus", "partner"]))
        asks = {"none": [], "focus": [first], "partner": [second] if second else []}[pick]
        app.append(draw(vendor_container(f"c{i}", asks)))
    init = [draw(vendor_container("init0", draw(st.sampled_from([[], [first]]))))] if one_in(draw, 6) else []
    asked = [first, *([second] if second else [])]
    metadata: dict[str, Any] = {"name": "new", "namespace": draw(st.sampled_from(NAMESPACES)), "uid": "uid-new"}
    if ann := draw(vendor_annotations(asked, uuids)):
        metadata["annotations"] = ann
    spec: dict[str, Any] = {"containers": app}
    if init:
        spec["initContainers"] = init
    soft_split = (metadata.get("annotations") or {}).get(ASCEND_MODE) == "hami-core"
    if any(b.family == "ascend" for b in asked) and not soft_split and not one_in(draw, 5):
        drop_ascend_cores(init + app)  # else most pods would be refused for them
    sgpu_asked = [b for b in asked if b.family == "metax-sgpu"]
    if sgpu_asked and sgpu.SGPU_APP_CLASS in (metadata.get("annotations") or {}) and not one_in(draw, 4):
        sgpu.one_card_each(init + app, sgpu_asked[0].count)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def drop_ascend_cores(containers: list[dict[str, Any]]) -> None:
    for c in containers:
        for part in (c.get("resources") or {}).values():
            for name in [n for n in part if n.startswith("huawei.com/") and n.endswith("-core")]:
                del part[name]


# --- quotas and cases --------------------------------------------------------------------------


# Memory limits per family, in the resource's own units (HAMi's FitQuota scales them by the
# backend's memory factor): Cambricon's are 256 MiB each, so its limits are smaller numbers.
QUOTA_MEMORY = {"": [4000, 20000, 100000, 1000000], "cambricon": [20, 64, 128, 400, 4000]}
# Core limits per family: AWS Neuron counts core bitmasks (a few per device).
QUOTA_CORES = {"neuron": [1, 2, 4, 8, 30]}


@st.composite
def vendor_quotas(draw, backends: list[Backend]) -> list[dict[str, Any]]:
    """At most one quota per namespace on a backend's memory and core names (checked by HAMi's webhook)."""
    out = []
    named = [b for b in backends if b.memory or b.cores]
    # Cambricon checks its quota card by card in the Fit too: give it quotas more often.
    per_card = [b for b in named if b.family == "cambricon"]
    for i, ns in enumerate(NAMESPACES):
        if not named or not one_in(draw, 2 if per_card else 5):
            continue
        b = (
            draw(st.sampled_from(per_card or named))
            if per_card and draw(st.booleans())
            else draw(st.sampled_from(named))
        )
        hard = {}
        if b.memory and draw(st.booleans()):
            hard[f"limits.{b.memory}"] = str(draw(st.sampled_from(QUOTA_MEMORY.get(b.family, QUOTA_MEMORY[""]))))
        if b.cores and (draw(st.booleans()) or not hard):
            hard[f"limits.{b.cores}"] = str(draw(st.sampled_from(QUOTA_CORES.get(b.family, [50, 100, 300, 1000]))))
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": f"vq{i}", "namespace": ns},
                "spec": {"hard": hard},
            }
        )
    return out


@st.composite
def vendor_cases(draw, family: str, partners: tuple[str, ...] = (), max_nodes: int = 3) -> dict[str, Any]:
    """A cluster whose nodes register `family` (some beside a partner family) and a pod asking it."""
    now = int(time.time())
    focus = list(FAMILIES[family])
    if family == "ascend":  # seven chips: a case draws one or two, so that its nodes share them
        focus = draw(st.lists(st.sampled_from(focus), min_size=1, max_size=2, unique=True))
    partner_backends = [b for p in partners if p != family for b in FAMILIES[p]]
    nodes, residents, mixed = [], [], False
    uuids: dict[str, list[str]] = {}
    present: dict[str, Backend] = {}
    # AWS Neuron: one cores-per-device value for every node of the case (vendors.neuron_capacity).
    neuron_cores = draw(st.sampled_from([2, 2, 2, 1, 4, 8, 0])) if "neuron" in (family, *partners) else 2
    for n in range(draw(st.integers(1, max_nodes))):
        name = f"node-{n}"
        backends = draw(st.lists(st.sampled_from(focus), min_size=1, max_size=min(2, len(focus)), unique=True))
        if partner_backends and one_in(draw, 3):
            backends.append(draw(st.sampled_from(partner_backends)))
        obj, seen = draw(vendor_node(name, backends, now, neuron_cores))
        nodes.append(obj)
        mixed = mixed or len(backends) > 1
        for b in backends:
            present[b.common_word] = b
            uuids.setdefault(b.common_word, []).extend(d["id"] for d in seen[b.common_word])
            for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
                residents.append((b, name, seen[b.common_word]))
    pods = [
        draw(vendor_resident(i, b, name, devs)) for i, (b, name, devs) in enumerate(residents) if b.family != "nvidia"
    ]
    gpu_nodes = [(name, devs) for b, name, devs in residents if b.family == "nvidia"]
    if gpu_nodes:
        pods += [draw(nvidia.resident_pod(i, gpu_nodes)) for i in range(len(gpu_nodes))]
    focus_present = [b for b in focus if b.common_word in present]
    others = [b for b in present.values() if b.family != family]
    pod = draw(vendor_pod(focus_present, others, uuids))
    involved = {b.family for b in present.values()}
    return {
        "items": nodes + pods + draw(vendor_quotas(list(present.values()))),
        "pod": pod,
        "node_policy": draw(st.sampled_from(nvidia.NODE_POLICIES)),
        "gpu_policy": draw(st.sampled_from(["spread", "binpack", "mutex", "spread", "binpack"])),
        "vendors": sorted(involved),
        "mixed_nodes": mixed,
    }

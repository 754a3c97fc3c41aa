"""hami_fast against HAMi on one case: what HAMi is asked, what must match, the kept differences.

The kept differences (docs/compatibility.md) are modelled here, never skipped:

- Terminating pods: a long-running HAMi counts a resident pod with a `deletionTimestamp` until it
  is gone, and only a HAMi that meets the pod at start-up ignores it. hami_fast always counts it,
  so HAMi is shown the steady state: the pod without its `deletionTimestamp`.
- The shrink after init containers finish: HAMi applies it on the pod's next update; the oracle's
  `--resync` sends that update (see oracle.run).
- Device lists HAMi wrote without padding, on a pod with a GPU-less container before a GPU one:
  HAMi reads slot *i* as container *i* and miscounts the pod (its shrink even drops it to 0);
  hami_fast reads the slots onto the containers that request GPUs. HAMi is shown the same list
  padded to one slot per container, which it reads right.
- Node policies HAMi does not know but hami_fast implements (`fgd`, `bestfit`, ...): HAMi takes
  them as binpack; only the per-node verdicts and reasons are compared, not scores or the choice.
"""

from __future__ import annotations

import copy
import re
import struct
from typing import Any

import hami_fast._native as native
import orjson
from k8s_objects import explained

from hamigen import sgpu
from hamigen.strategies import requests_gpu

ALLOCATED = "hami.io/vgpu-devices-allocated"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
ALLOCATED_SUFFIX = "-devices-allocated"
# Annotations other vendors' PatchAnnotations write beside their device lists; those holding a
# time are compared for presence only.
VENDOR_ANNOTATIONS = (
    "CAMBRICON_DSMLU_ASSIGNED",
    "CAMBRICON_DSMLU_PROFILE",
    "mthreads.com/gpu-index",
    "BAIDU_COM_DEVICE_IDX",
    "hami.io/kunlun-allocated",
    "mthreads.com/predicate-node",
    "AWS_NEURON_IDS",
    "NEURON_RESOURCE_TYPE",
    "NEURON_ALLOCATED",
    "aws.amazon.com/predicate-node",
    "enflame.com/gcu-assigned",
    "enflame.com/gcu-assigned-index",
    "enflame.com/gcu-assigned-id",
    "enflame.com/gcu-assigned-minor",
    "enflame.com/gcu-request-size",
    "assigned-containers",
    "metax-tech.com/gpu-devices-allocated",
)
# Device lists under a key without the usual suffix (Kunlunxin's whole cards).
OTHER_ALLOCATED = ("hami.io/kunlun-allocated",)
TIMED_VENDOR_ANNOTATIONS = (
    "mthreads.com/predicate-time",
    "predicate-time",
    "NEURON_ALLOC_TIME",
    "enflame.com/gcu-assigned-time",
    "metax-tech.com/predicate-time",
)
NO_RESOURCE = "pod requests no HAMi resource (Filter returns all NodeNames)"
OUR_NO_RESOURCE = "requests no vGPU resource; kube-scheduler places it without hami-fast"
FILTER_ERROR = "calcScore failed "
OWN_NODE_POLICIES = {"fgd", "fgd-balance", "bestfit", "dotprod", "packing", "clustering", "random"}


def slots_of(value: str) -> list[str]:
    parts = value.split(";")
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def padded(pod: dict[str, Any], count_name: str = "nvidia.com/gpu") -> str | None:
    """The pod's device list padded to one slot per container, if HAMi wrote it without padding."""
    value = (pod.get("metadata", {}).get("annotations") or {}).get(ALLOCATED)
    if value is None:
        return None
    spec = pod.get("spec") or {}
    everyone = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    uses_gpu = [requests_gpu(c, count_name) for c in everyone]
    slots = slots_of(value)
    if len(slots) >= len(everyone) or sum(uses_gpu) != len(slots):
        return None
    given = iter(slots)
    return "".join((next(given) if gpu else "") + ";" for gpu in uses_gpu)


def hami_view(items: list[dict[str, Any]], count_name: str = "nvidia.com/gpu") -> list[dict[str, Any]]:
    """The snapshot as HAMi is shown it, the kept differences modelled (module docstring);
    `count_name` is the device config's NVIDIA count resource."""
    out = []
    for obj in items:
        if obj.get("kind") == "Pod":
            obj = copy.deepcopy(obj)
            obj["metadata"].pop("deletionTimestamp", None)
            if (fixed := padded(obj, count_name)) is not None:
                obj["metadata"]["annotations"][ALLOCATED] = fixed
        out.append(obj)
    return out


def engine_cluster(
    items: list[dict[str, Any]], node_policy: str = "", gpu_policy: str = "", settings: dict[str, Any] | None = None
) -> tuple[Any, list[str]]:
    """The engine on the snapshot, configured with the given default policies (as serve's flags) and
    engine settings (e.g. a device config)."""
    config = {k: v for k, v in (("node_scheduler_policy", node_policy), ("gpu_scheduler_policy", gpu_policy)) if v}
    config.update(settings or {})
    cluster = native.Cluster(orjson.dumps(config) if config else None)
    page = orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    _, _, _, errors = cluster.apply_list_page(page)
    return cluster, errors


def engine_explain(
    items: list[dict[str, Any]],
    pod: dict[str, Any],
    node_policy: str,
    gpu_policy: str,
    now: int,
    settings: dict[str, Any] | None = None,
):
    cluster, _ = engine_cluster(items, settings=settings)
    return explained(cluster, orjson.dumps(pod), now, node_policy, gpu_policy)


def engine_allocations_per_node(case: dict[str, Any], nodes: list[str], now: int) -> dict[str, dict[str, str] | None]:
    """Every `-devices-allocated` annotation hami_fast writes on each node, each node alone among the
    candidates; None where the pod does not go there."""
    out: dict[str, dict[str, str] | None] = {}
    for name in nodes:
        items = [o for o in case["items"] if o.get("kind") != "Node" or o["metadata"]["name"] == name]
        r = engine_explain(items, case["pod"], case["node_policy"], case["gpu_policy"], now, case.get("settings"))
        placed = r["node"] == name
        allocated = {k: v for k, v in r["annotations"].items() if is_device_list(k)}
        out[name] = allocated if placed else None
    return out


def is_device_list(key: str) -> bool:
    """A backend's device list as HAMi's oracle reports it (MetaX sGPU's own JSON list is not one)."""
    return key.startswith("hami.io/") and key.endswith(ALLOCATED_SUFFIX) or key in OTHER_ALLOCATED


def effective_node_policy(case: dict[str, Any]) -> str:
    ann = case["pod"]["metadata"].get("annotations") or {}
    return ann.get("hami.io/node-scheduler-policy", case["node_policy"])


def f32(x: float) -> bytes:
    return struct.pack("<f", x)


def best_nodes(scores: dict[str, float], policy: str) -> set[str]:
    """HAMi picks among equal best scores at random: every node it could have picked."""
    if not scores:
        return set()
    pick = min if policy == "spread" else max
    best = pick(scores.values())
    return {n for n, s in scores.items() if s == best}


def compare(case: dict[str, Any], hami: dict[str, Any], ours: dict[str, Any], now: int) -> list[str]:
    """Every disagreement between HAMi's answer and hami_fast's, as readable lines."""
    diffs: list[str] = []
    if hami.get("error") == NO_RESOURCE and (ours.get("error") or "").endswith(OUR_NO_RESOURCE):
        return []
    if FILTER_ERROR in (hami.get("error") or "") and ours.get("error"):
        return []  # both refuse the pod's hints; hami_fast's message names the pod and annotation its own way
    if (hami.get("error") or "") != (ours.get("error") or ""):
        return [f"error: HAMi {hami.get('error')!r}, hami_fast {ours.get('error')!r}"]
    if hami.get("error"):
        return []
    if hami["failed"] != ours["failed"]:
        diffs.append(f"failed: HAMi {hami['failed']}, hami_fast {ours['failed']}")
    own_policy = effective_node_policy(case).strip() in OWN_NODE_POLICIES
    if set(hami["scores"]) != set(ours["scores"]):
        diffs.append(f"fitting nodes: HAMi {sorted(hami['scores'])}, hami_fast {sorted(ours['scores'])}")
    if own_policy:
        return diffs
    for name, score in hami["scores"].items():
        if name in ours["scores"] and f32(score) != f32(ours["scores"][name]):
            diffs.append(f"score of {name}: HAMi {score!r}, hami_fast {ours['scores'][name]!r}")
    if (hami["node"] is None) != (ours["node"] is None):
        diffs.append(f"node: HAMi {hami['node']}, hami_fast {ours['node']}")
    elif ours["node"] is not None:
        policy = "spread" if effective_node_policy(case) == "spread" else "binpack"
        if ours["node"] not in best_nodes(hami["scores"], policy):
            diffs.append(f"node: hami_fast {ours['node']} not among HAMi's best {best_nodes(hami['scores'], policy)}")
        a = ours["annotations"]
        if a.get("hami.io/vgpu-node") != ours["node"] or a.get(TO_ALLOCATE) != a.get(ALLOCATED):
            diffs.append(f"annotations: {a}")
        if hami["node"] == ours["node"]:
            diffs += compare_device_annotations(hami["annotations"], a)
        diffs += compare_devices_per_node(case, hami, now)
    return diffs


VASTAI_KEYS = ("hami.io/Vastai-devices-allocated", "hami.io/Vastai-devices-to-allocate")
VASTAI_REGISTER = "hami.io/node-va-register"


def vastai_dies(items: list[dict[str, Any]]) -> dict[str, str]:
    """Every Vastai die registered in die mode, with its card (AIC)."""
    out = {}
    for obj in items:
        if obj.get("kind") != "Node":
            continue
        try:
            devices = orjson.loads((obj["metadata"].get("annotations") or {}).get(VASTAI_REGISTER, "[]"))
        except orjson.JSONDecodeError:
            continue
        for d in devices if isinstance(devices, list) else []:
            info = (d.get("custominfo") if isinstance(d, dict) else None) or {}
            if info.get("DeviceStrategy") == "die" and isinstance(info.get("AIC"), str):
                out[d.get("id")] = info["AIC"]
    return out


ASCEND_REGISTER = "hami.io/node-register-Ascend"
ASCEND_LIST = re.compile(r"hami\.io/(Ascend[^/]*)-devices-(allocated|to-allocate)")


def ascend_groups(items: list[dict[str, Any]]) -> dict[str, str]:
    """Every registered NPU HAMi groups when a container takes several: a 910C by its card (index
    // 2), another Ascend910* by its numeric NetworkID."""
    out = {}
    for obj in items:
        if obj.get("kind") != "Node":
            continue
        for key, value in (obj["metadata"].get("annotations") or {}).items():
            if not key.startswith(ASCEND_REGISTER + "910"):
                continue
            try:
                devices = orjson.loads(value)
            except orjson.JSONDecodeError:
                continue
            for d in devices if isinstance(devices, list) else []:
                if not isinstance(d, dict):
                    continue
                network = (d.get("custominfo") or {}).get("NetworkID")
                if key.endswith("910C"):
                    out[d.get("id")] = f"card {int(d.get('index') or 0) // 2}"
                elif isinstance(network, int | float) and not isinstance(network, bool):
                    out[d.get("id")] = f"net {int(network)}"
    return out


DRS_REGISTER = "enflame.com/gcu-drs-capacity"
DRS_ASSIGNED = "assigned-containers"


def drs_twins(items: list[dict[str, Any]]) -> dict[str, str]:
    """Enflame DRS profile twins: profiles of a node with equal slices and memory (HAMi sorts its
    profiles by both and takes the first that fits, so which twin comes first is Go's map order).
    Keyed `drs <node> <name>`, valued with every twin's name and id."""
    from hamigen.vendors import parse_drs_profile

    out = {}
    for obj in items:
        if obj.get("kind") != "Node":
            continue
        try:
            spec = orjson.loads((obj["metadata"].get("annotations") or {}).get(DRS_REGISTER, "{}"))
        except orjson.JSONDecodeError:
            continue
        profiles = spec.get("profiles") if isinstance(spec, dict) else None
        groups: dict[tuple[int, int], list[tuple[str, str]]] = {}
        for name, pid in (profiles if isinstance(profiles, dict) else {}).items():
            size, memory = parse_drs_profile(name)
            if size > 0 and memory > 0:
                groups.setdefault((size, memory), []).append((name, str(pid)))
        for twins in (g for g in groups.values() if len(g) > 1):
            value = orjson.dumps([sorted(n for n, _ in twins), sorted(i for _, i in twins)]).decode()
            out.update({f"drs {obj['metadata']['name']} {name}": value for name, _ in twins})
    return out


def drs_canonical(assigned: str, node: str | None, groups: dict[str, str]) -> str:
    """`assigned-containers` with a twin profile (name and id) replaced by all its twins."""
    try:
        entries = orjson.loads(assigned)
    except orjson.JSONDecodeError:
        return assigned
    if not isinstance(entries, dict):
        return assigned
    for entry in (e for e in entries.values() if isinstance(e, dict)):
        twins = groups.get(f"drs {node} {entry.get('profileName')}")
        if twins is None:
            continue
        names, ids = orjson.loads(twins)
        entry["profileName"] = "twins " + "|".join(names)
        if entry.get("profileID", "") in ids:
            entry["profileID"] = "|".join(ids)
    return orjson.dumps(entries, option=orjson.OPT_SORT_KEYS).decode()


KUNLUN_LISTS = ("hami.io/kunlun-allocated", "hami.io/xpu-devices-allocated", "hami.io/xpu-devices-to-allocate")
KUNLUN_MIXED = "kunlun on a mixed node"
NOT_DEVICES = {"cpu", "memory", "pods", "ephemeral-storage", "kunlunxin.com/xpu"}
VXPU_REGISTER = "hami.io/node-register-xpu"
VXPU_COUNT = "kunlunxin.com/vxpu"


def kunlun_mixed(items: list[dict[str, Any]]) -> dict[str, str]:
    """Kunlunxin cards, whole or vXPU, on a node that registers another backend too (the two Kunlunxin
    backends count as two). HAMi's candidate list is sorted with pdqsort past 12 devices, and its
    input is in Go's vendor map order: the cards a container takes come in either order, and
    graghSelect picks by position: which cards, and in which order, is random (compared as how
    many)."""
    out = {}
    for obj in items:
        if obj.get("kind") != "Node":
            continue
        annotations = obj["metadata"].get("annotations") or {}
        capacity = (obj.get("status") or {}).get("capacity") or {}
        others = [
            k for k in annotations if k.endswith("-register") or k in (DRS_REGISTER, "metax-tech.com/node-gpu-devices")
        ]
        others += [k for k in capacity if k not in NOT_DEVICES]
        cards = str(capacity.get("kunlunxin.com/xpu") or "0")
        name = obj["metadata"]["name"]
        if others and cards.isdigit():
            out.update({f"{name}-kunlun-{i}": KUNLUN_MIXED for i in range(int(cards))})
        vxpu_others = [k for k in others if k != VXPU_COUNT] + (["kunlun"] if cards not in ("", "0") else [])
        if vxpu_others:
            out.update({vxpu: KUNLUN_MIXED for vxpu in registered_ids(annotations.get(VXPU_REGISTER))})
    return out


def registered_ids(register: str | None) -> list[str]:
    """The device ids of a JSON registration; none where it is absent or malformed."""
    try:
        devices = orjson.loads(register or "[]")
    except orjson.JSONDecodeError:
        return []
    if not isinstance(devices, list):
        return []
    return [str(d["id"]) for d in devices if isinstance(d, dict) and "id" in d]


def device_groups(items: list[dict[str, Any]]) -> dict[str, str]:
    """The groups HAMi takes devices by in Go's map order: Vastai dies, Ascend networks and cards,
    MetaX sGPU's MetaLink zones where they tie; the Enflame DRS profiles it picks among likewise;
    and the order of Kunlunxin cards on a node with another backend."""
    groups = {**vastai_dies(items), **ascend_groups(items), **drs_twins(items), **sgpu.zone_groups(items)}
    return {**groups, **kunlun_mixed(items)}


def canonical(annotations: dict[str, str] | None, dies: dict[str, str]) -> dict[str, str] | None:
    """Vastai die-mode lists reduced to how many dies each container takes from each card, largest
    first: HAMi takes cards of equal free dies in Go's map order (vastai/device.go:336-374), so which
    of them is random, while the shape (and the node score, 181-219) is not. Likewise a container's
    several Ascend NPUs: network groups of equal size, and whole 910C cards, come in map order
    (ascend/device.go:682-800); the shape shows the grouping (and the node score) and whether the
    cards taken are whole, and the `huawei.com/<chip>` list then loses its UUIDs. An Enflame DRS
    profile with twins is compared as its twins (drs_canonical)."""
    if annotations is None or not dies:
        return annotations
    out = dict(annotations)
    if DRS_ASSIGNED in out:
        out[DRS_ASSIGNED] = drs_canonical(out[DRS_ASSIGNED], out.get("hami.io/vgpu-node"), dies)
    for key in VASTAI_KEYS:
        if key in out:
            out[key] = ";".join(die_shape(slot, dies) for slot in out[key].split(";"))
    for key in [k for k in sgpu.SGPU_LISTS if k in out]:
        out[key] = ";".join(die_shape(slot, dies) for slot in out[key].split(";"))
    if any(out.get(k) != annotations.get(k) for k in sgpu.SGPU_LISTS) and sgpu.METAX_LIST in out:
        out[sgpu.METAX_LIST] = sgpu.without_uuids(out[sgpu.METAX_LIST])
    for key in [k for k in KUNLUN_LISTS if k in out]:
        out[key] = ";".join(kunlun_order_free(slot, dies) for slot in out[key].split(";"))
        if out[key] != annotations[key] and "BAIDU_COM_DEVICE_IDX" in out:
            out["BAIDU_COM_DEVICE_IDX"] = f"x{len(out['BAIDU_COM_DEVICE_IDX'].split(','))}"
    for key in list(out):
        if match := ASCEND_LIST.fullmatch(key):
            out[key] = ";".join(npu_shape(slot, dies) for slot in out[key].split(";"))
            runtime = f"huawei.com/{match.group(1)}"
            if out[key] != annotations[key] and runtime in out:
                out[runtime] = without_uuids(out[runtime])
    return out


def kunlun_order_free(slot: str, groups: dict[str, str]) -> str:
    """A container's Kunlunxin cards as how many it took where HAMi's choice follows Go's order
    (kunlun_mixed): graghSelect picks by position in the sorted list, so the order decides which."""
    entries = [e for e in slot.split(":") if e]
    if not entries or not all(groups.get(e.split(",")[0]) == KUNLUN_MIXED for e in entries):
        return slot
    return f"kunlun cards x{len(entries)}"


def npu_shape(slot: str, groups: dict[str, str]) -> str:
    """A container's Ascend NPUs as their group shape when it took several (one is not random)."""
    return die_shape(slot, groups) if slot.count(":") > 1 else slot


def without_uuids(runtime: str) -> str:
    try:
        entries = orjson.loads(runtime)
    except orjson.JSONDecodeError:
        return runtime
    if not isinstance(entries, list):
        return runtime
    kept = [{k: v for k, v in e.items() if k != "UUID"} for e in entries if isinstance(e, dict)]
    return orjson.dumps(sorted(kept, key=lambda e: orjson.dumps(e, option=orjson.OPT_SORT_KEYS))).decode()


def canonical_answer(answer: dict[str, Any], dies: dict[str, str]) -> dict[str, Any]:
    """An explain answer (HAMi's or hami_fast's) with its Vastai die-mode lists reduced (canonical)."""
    if not dies:
        return answer
    vendor_devices = {n: canonical(v, dies) for n, v in (answer.get("vendor_devices") or {}).items()}
    return {**answer, "annotations": canonical(answer.get("annotations"), dies), "vendor_devices": vendor_devices}


def die_shape(slot: str, dies: dict[str, str]) -> str:
    uuids = [entry.split(",")[0] for entry in slot.split(":") if entry]
    if not uuids or not all(u in dies for u in uuids):
        return slot
    groups: dict[str, int] = {}
    for u in uuids:
        groups[dies[u]] = groups.get(dies[u], 0) + 1
    return "dies " + "+".join(str(n) for n in sorted(groups.values(), reverse=True))


def device_annotation_keys(annotations: dict[str, str]) -> set[str]:
    """The node annotation and every backend's device lists and extras on a scheduled pod."""
    return {
        k
        for k in annotations
        if (k.startswith("hami.io/") and k.endswith((ALLOCATED_SUFFIX, "-devices-to-allocate")))
        or k in VENDOR_ANNOTATIONS
        or k.startswith("huawei.com/Ascend")
    } | {"hami.io/vgpu-node"}


def compare_device_annotations(hami: dict[str, str], ours: dict[str, str]) -> list[str]:
    diffs = []
    for key in sorted(device_annotation_keys(hami) | device_annotation_keys(ours)):
        if hami.get(key) != ours.get(key):
            diffs.append(f"annotation {key}: HAMi {hami.get(key)!r}, hami_fast {ours.get(key)!r}")
    for key in TIMED_VENDOR_ANNOTATIONS:
        if (key in hami) != (key in ours):
            diffs.append(f"annotation {key}: HAMi {'writes' if key in hami else 'does not write'} it")
    return diffs


def resolved(runs: list[dict[str, Any]], ours: dict[str, Any]) -> dict[str, Any]:
    """HAMi's answer to compare hami_fast's with, from identical runs of a case HAMi decides at random
    (a container asking two backends: Go's map order picks whose Fit runs first, so whose failure
    reason a node gets; Vastai's die groups of equal size; a webhook error of two backends): per
    node, the verdict and score hami_fast gave if some run gave it; the chosen node and annotations
    of a run that chose hami_fast's node; every run's devices per node as `alternatives`."""
    if len(runs) == 1:
        return runs[0]
    base = next((r for r in runs if (r.get("error") or "") == (ours.get("error") or "")), runs[0])
    out = {**base, "failed": {}, "scores": {}}
    nodes = set().union(*(set(r.get("failed") or {}) | set(r.get("scores") or {}) for r in runs))
    for name in sorted(nodes):
        pick = next((r for r in runs if node_verdict(r, name) == node_verdict(ours, name)), base)
        if name in (pick.get("failed") or {}):
            out["failed"][name] = pick["failed"][name]
        if name in (pick.get("scores") or {}):
            out["scores"][name] = pick["scores"][name]
    chosen = [r for r in runs if r.get("node") == ours.get("node")] or [base]
    a = ours.get("annotations") or {}
    best = next((r for r in chosen if not compare_device_annotations(r.get("annotations") or {}, a)), chosen[0])
    out["node"], out["annotations"] = best.get("node"), best.get("annotations") or {}
    out["alternatives"] = {
        field: {name: [(r.get(field) or {}).get(name) for r in runs] for r in runs for name in r.get(field) or {}}
        for field in ("devices", "vendor_devices")
    }
    return out


def node_verdict(answer: dict[str, Any], name: str) -> tuple[Any, Any]:
    score = (answer.get("scores") or {}).get(name)
    return (answer.get("failed") or {}).get(name), None if score is None else f32(score)


def options(hami: dict[str, Any], field: str, name: str) -> list[Any]:
    """What HAMi wrote in `field` for node `name`, in every run that was made."""
    return ((hami.get("alternatives") or {}).get(field) or {}).get(name) or [(hami.get(field) or {}).get(name)]


def compare_devices_per_node(case: dict[str, Any], hami: dict[str, Any], now: int) -> list[str]:
    """The devices of every backend on every node that fits, against hami_fast's with that node alone
    (`devices` holds NVIDIA's list, "" for a pod asking other vendors only; `vendor_devices` all)."""
    nvidia = hami.get("devices") or {}
    vendors = hami.get("vendor_devices") or {}
    diffs = []
    mine = engine_allocations_per_node(case, sorted(set(nvidia) | set(vendors)), now)
    dies = device_groups(case["items"])
    for name, allocated in mine.items():
        allocated = canonical(allocated, dies)
        if allocated is None:
            diffs.append(f"devices on {name}: HAMi places the pod there, hami_fast does not (that node alone)")
            continue
        if name in nvidia and allocated.get(ALLOCATED) not in [v or None for v in options(hami, "devices", name)]:
            diffs.append(f"devices on {name}: HAMi {nvidia[name]!r}, hami_fast {allocated.get(ALLOCATED)!r}")
        if name in vendors and allocated not in options(hami, "vendor_devices", name):
            diffs.append(f"vendor devices on {name}: HAMi {vendors[name]!r}, hami_fast {allocated!r}")
    return diffs

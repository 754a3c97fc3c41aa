"""Hypothesis strategies: random clusters (nodes, placed pods, quotas) and random pods to place.

Helpers named ``*(draw, ...)`` are plain functions called from inside :func:`scenarios`; the
strategies they draw from are built once at import time (building strategies per draw is slow).
"""

import copy
import json

from hypothesis import strategies as st

from .objects import container, gpu, node, placed_pod, pod, quota

NODE_NAMES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
NAMESPACES = ["default", "team-a", "team-b"]
GPU_TYPES = [
    "NVIDIA-Tesla V100-PCIE-32GB",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA-Tesla T4",
    "NVIDIA",  # the unit-test type: device scores then include the request (§10.1 quirk)
    "Tesla P4",  # not an NVIDIA type for Fit
]
GPU_POLICIES = [
    "binpack",
    "spread",
    "mutex",
    "topology-aware",
    "numa",
    "binpack,numa",
    "spread,numa",
    "numa,binpack",
    "numa,spread",
    "binpack,mutex",
    "spread,topology-aware",
    "topology-aware,numa",
    "mutex,numa",
    "binpack,spread",
    "unknown",
]

DICE = st.integers(0, 99)


def chance(draw, percent):
    """True with the given probability; False for Hypothesis' simplest draw (0)."""
    return draw(DICE) >= 100 - percent


# nodes
NODE_SIZE = st.integers(1, 8)
COUNTS = st.sampled_from([1, 2, 3, 4, 10, 10, 10])
DEVMEM = st.sampled_from([1000, 8000, 15360, 16384, 32768, 40960, 81920])
DEVCORES = st.sampled_from([100] * 8 + [200, 50, 0])
TYPES = st.sampled_from(GPU_TYPES)
NUMAS = st.sampled_from([0, 0, 1, 1, 2])
MODES = st.sampled_from(["hami-core"] * 17 + ["mps", "", "mig"])
HEALTH = st.sampled_from([True] * 9 + [False])
PAIR_VALUE = st.sampled_from([0, 10, 20, 30, 50, 60, 100, 120, 200, 600, 1800])
BROKEN_REGISTER = st.sampled_from(["[]", "not json", "{}", '[{"id":"GPU-x","count":"10"}]'])

# placed pods
INIT_COUNT = st.sampled_from([0, 0, 0, 1, 2])
APP_COUNT = st.integers(1, 3)
USED_CORES = st.sampled_from([0, 0, 10, 20, 30, 50, 100])
PHASES = st.sampled_from(["Running"] * 5 + ["Pending", "Succeeded", "Failed", None])
NAMESPACE = st.sampled_from(NAMESPACES)
MEM_QUOTA = st.sampled_from([0, 4000, 20000, 50000, 200000])
CORE_QUOTA = st.sampled_from([0, 50, 100, 300, 1000])

# the pod to place
RESOURCE_KINDS = st.sampled_from(
    [
        "mem",
        "bare",
        "mem",
        "pct",
        "mem+cores",
        "mem+cores",
        "pct+cores",
        "mem+pct",
        "mem-only",
        "cores-only",
        "pct-only",
        "requests",
        "none",
        "odd",
    ]
)
NUMS = st.sampled_from([1, 1, 1, 2, 2, 3, 4])
MEM = st.sampled_from([100, 1000, 2000, 3000, 4096, 8000, 16000, 30000, 50000]) | st.integers(0, 41000)
PCT = st.sampled_from([0, 10, 25, 50, 50, 100]) | st.integers(1, 100)
CORES = st.sampled_from([0, 10, 20, 30, 50, 100, 100]) | st.integers(0, 100)
ODD_COUNT = st.sampled_from([None, 0, "1.5"])
ODD_MEM = st.sampled_from([None, "1.5", -5, 2**31])
ODD_CORES = st.sampled_from([None, 150, "2.5"])
NEW_INIT_COUNT = st.sampled_from([0, 0, 0, 0, 1, 2])
NODE_POLICY_ARG = st.sampled_from([None, "binpack", "spread"])
GPU_POLICY_ARG = st.sampled_from([None, "binpack", "spread", "topology-aware", "mutex", "binpack,numa"])
NOW = st.integers(1_600_000_000, 1_900_000_000)


# ---------------------------------------------------------------------------------------------
# quantities


def quantity(draw, value):
    """An integer as a JSON int or one of the Kubernetes spellings of the same number."""
    forms = [value, str(value), f"{value * 1000}m"]
    if value and value % 1000 == 0:
        forms.append(f"{value // 1000}k")
    if value and value % 1024 == 0:
        forms.append(f"{value // 1024}Ki")
    return forms[draw(st.integers(0, len(forms) - 1))] if chance(draw, 30) else value


# ---------------------------------------------------------------------------------------------
# nodes


def gpu_device(draw, uuid, index):
    return gpu(
        uuid,
        index=index,
        count=draw(COUNTS),
        devmem=draw(DEVMEM),
        devcore=draw(DEVCORES),
        type=draw(TYPES),
        numa=draw(NUMAS),
        mode=draw(MODES),
        health=draw(HEALTH),
    )


def pair_scores(draw, uuids):
    """Symmetric pair scores (§3.4) with some pairs left out."""
    table = {}
    for i, a in enumerate(uuids):
        for b in uuids[i + 1 :]:
            if chance(draw, 80):
                table[a, b] = table[b, a] = draw(PAIR_VALUE)
    entries = [{"uuid": a, "score": {b: table[a, b] for b in uuids if (a, b) in table}} for a in uuids]
    return json.dumps(entries, separators=(",", ":"))


def gpu_node(draw, name):
    """``(Node, devices)``: 1-8 GPUs; sometimes cordons, pair scores, or a broken registration."""
    devices = [gpu_device(draw, f"GPU-{name}-{k}", k) for k in range(draw(NODE_SIZE))]
    uuids = [d["id"] for d in devices]
    annotations = {}
    if chance(draw, 15):
        annotations["hami.io/device-cordon"] = ",".join(draw(st.lists(st.sampled_from(uuids), max_size=3)))
    if chance(draw, 30):
        annotations["hami.io/node-nvidia-score"] = pair_scores(draw, uuids)
    broken = 99 - draw(DICE)
    if broken < 3:
        return node(name, annotations=annotations), devices
    if broken < 6:
        return node(name, register=draw(BROKEN_REGISTER), annotations=annotations), devices
    if broken < 8:
        annotations["hami.io/node-nvidia-score"] = "[{"
    return node(name, devices, annotations=annotations), devices


# ---------------------------------------------------------------------------------------------
# pods already placed by HAMi


def allocation_slot(draw, devices):
    """One container's entry of ``hami.io/vgpu-devices-allocated`` (often empty)."""
    if chance(draw, 25):
        return ""
    count = draw(st.integers(1, min(3, len(devices))))
    picked = draw(st.permutations(devices))[:count]
    entries = []
    for device in picked:
        uuid = "GPU-unknown" if chance(draw, 5) else device["id"]
        mem = draw(st.integers(0, device["devmem"] // 2))
        entries.append(f"{uuid},NVIDIA,{mem},{draw(USED_CORES)}:")
    return "".join(entries)


def existing_pod(draw, index, placements):
    """A pod with a valid ``hami.io/vgpu-devices-allocated`` on one of the nodes."""
    node_name, devices = placements[draw(st.integers(0, len(placements) - 1))]
    n_init, n_app = draw(INIT_COUNT), draw(APP_COUNT)
    slots = [allocation_slot(draw, devices) for _ in range(n_init + n_app)]
    statuses = None
    if n_init:
        statuses = draw(st.sampled_from([None, [0] * n_init, [None] * n_init, [0] * (n_init - 1) + [1]]))
    return placed_pod(
        f"old-{index}",
        node_name,
        "".join(slot + ";" for slot in slots),
        [container(f"app{k}") for k in range(n_app)],
        init_containers=[container(f"init{k}") for k in range(n_init)],
        init_statuses=statuses,
        namespace=draw(NAMESPACE),
        phase=draw(PHASES),
    )


def namespace_quota(draw, namespace):
    hard = {}
    if chance(draw, 50):
        hard["limits.nvidia.com/gpumem"] = quantity(draw, draw(MEM_QUOTA))
    if chance(draw, 50):
        hard["limits.nvidia.com/gpucores"] = quantity(draw, draw(CORE_QUOTA))
    if chance(draw, 15):
        hard["limits.nvidia.com/gpu"] = 1  # not tracked by HAMi
    return quota(f"quota-{namespace}", namespace, hard)


def cluster(draw, max_nodes, max_pods):
    """``(nodes, pods, quotas, placements)``: Node, placed Pod and ResourceQuota objects, and
    ``(node name, register devices)`` pairs."""
    names = draw(st.lists(st.sampled_from(NODE_NAMES), min_size=1, max_size=max_nodes, unique=True))
    built = [gpu_node(draw, name) for name in names]
    placements = [(name, devices) for name, (_node, devices) in zip(names, built)]
    pods = [existing_pod(draw, i, placements) for i in range(draw(st.integers(0, max_pods)))]
    quotas = [namespace_quota(draw, ns) for ns in NAMESPACES if chance(draw, 35)]
    if quotas and chance(draw, 10):
        second = namespace_quota(draw, quotas[0]["metadata"]["namespace"])
        second["metadata"]["name"] += "-second"
        second["metadata"]["uid"] += "-second"
        quotas.append(second)
    return [n for n, _devices in built], pods, quotas, placements


# ---------------------------------------------------------------------------------------------
# the pod to place


def gpu_resources(draw):
    """``(limits, requests)`` of one container: count / memory / percentage / cores, or nothing."""
    kind = draw(RESOURCE_KINDS)
    if kind == "none":
        return {"cpu": "1"}, None
    values = {
        "nvidia.com/gpu": draw(NUMS),
        "nvidia.com/gpumem": draw(MEM),
        "nvidia.com/gpumem-percentage": draw(PCT),
        "nvidia.com/gpucores": draw(CORES),
    }
    names = {
        "bare": ["gpu"],
        "mem": ["gpu", "gpumem"],
        "pct": ["gpu", "gpumem-percentage"],
        "mem+cores": ["gpu", "gpumem", "gpucores"],
        "pct+cores": ["gpu", "gpumem-percentage", "gpucores"],
        "mem+pct": ["gpu", "gpumem", "gpumem-percentage"],
        "mem-only": ["gpumem"],
        "cores-only": ["gpucores"],
        "pct-only": ["gpumem-percentage"],
        "requests": ["gpu", "gpumem", "gpucores"],
        "odd": ["gpu", "gpumem", "gpucores"],
    }[kind]
    chosen = {f"nvidia.com/{n}": quantity(draw, values[f"nvidia.com/{n}"]) for n in names}
    if kind == "odd":
        for name, odd in (
            ("nvidia.com/gpu", ODD_COUNT),
            ("nvidia.com/gpumem", ODD_MEM),
            ("nvidia.com/gpucores", ODD_CORES),
        ):
            value = draw(odd)
            if value is not None:
                chosen[name] = value
    if kind == "requests":
        kept = {k: v for k, v in chosen.items() if k == "nvidia.com/gpu" or chance(draw, 50)}
        return None, kept
    return chosen, None


def comma_list(items):
    return st.lists(st.sampled_from(items), min_size=1, max_size=3).map(",".join)


def weights():
    valid = st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)).filter(any).map(
        lambda w: f"slot={w[0]},core={w[1]},memory={w[2]}"
    ) | st.sampled_from(["memory=2, slot=1, core=0", " slot = 1,core=1,memory=+3 "])
    invalid = st.sampled_from(
        ["slot=1,core=1", "slot=0,core=0,memory=0", "slot=-1,core=1,memory=1", "slot=1,core=x,memory=1", "bogus"]
    )
    return st.one_of(valid, valid, valid, valid, valid, invalid)


FIXED_HINTS = {
    "nvidia.com/use-gputype": comma_list(["V100", "a100", "T4", "nvidia", " A100 ", "P4"]) | st.just(""),
    "nvidia.com/nouse-gputype": comma_list(["V100", "a100", "t4", "Tesla", "P4"]),
    "nvidia.com/numa-bind": st.sampled_from(["true", "true", "false", "True", "1", "yes"]),
    "nvidia.com/vgpu-mode": st.sampled_from(["hami-core", "mps", "hami-core,mps", "mig"]),
    "hami.io/node-scheduler-policy": st.sampled_from(["binpack", "spread", "other"]),
    "hami.io/gpu-scheduler-policy": st.sampled_from(GPU_POLICIES),
    "hami.io/device-scoring-weights": weights(),
}


def hint_annotations(draw, uuids):
    """Each user annotation of §2.3 with probability 1/8 (1/6 for the policies)."""
    annotations = {}
    uuid_hints = {
        "nvidia.com/use-gpuuuid": comma_list(uuids + ["GPU-nowhere", " " + uuids[0]]) | st.just(""),
        "nvidia.com/nouse-gpuuuid": comma_list(uuids),
    }
    for key, strategy in {**FIXED_HINTS, **uuid_hints}.items():
        if chance(draw, 16 if "policy" in key else 12):
            annotations[key] = draw(strategy)
    return annotations


def new_pod(draw, uuids, existing, forced):
    """The pod to place: 1-3 containers, sometimes init containers and hint annotations."""
    init = [container(f"init{k}", *gpu_resources(draw)) for k in range(draw(NEW_INIT_COUNT))]
    apps = [container(f"app{k}", *gpu_resources(draw)) for k in range(draw(APP_COUNT))]
    uid = "uid-new-pod"
    if existing and chance(draw, 10):
        uid = existing[draw(st.integers(0, len(existing) - 1))]["metadata"]["uid"]  # own usage is released
    annotations = {**hint_annotations(draw, uuids or ["GPU-none"]), **(forced or {})}
    return pod("new", apps, init_containers=init, namespace=draw(NAMESPACE), uid=uid, annotations=annotations)


# ---------------------------------------------------------------------------------------------
# how the engine learns the cluster: applies (and deletes) in some order


def earlier_version(draw, obj):
    """A plausible older version of a final object (its state before the last watch event)."""
    older = copy.deepcopy(obj)
    annotations = older["metadata"].setdefault("annotations", {})
    kind = draw(st.integers(0, 2))
    if older["kind"] == "Node":
        if kind == 0:
            annotations.pop("hami.io/node-nvidia-register", None)
        else:
            annotations["hami.io/node-nvidia-register"] = json.dumps([gpu(f"GPU-old-{older['metadata']['name']}")])
            annotations.pop("hami.io/device-cordon", None)
    elif older["kind"] == "Pod":
        if kind == 0:  # before the scheduler patched it
            for key in ("hami.io/vgpu-node", "hami.io/vgpu-devices-allocated", "hami.io/vgpu-devices-to-allocate"):
                annotations.pop(key, None)
        elif kind == 1:  # still pending, init containers not started
            older["status"] = {"phase": "Pending"}
        else:  # init containers still running
            statuses = older["status"].get("initContainerStatuses") or []
            for status in statuses:
                status["state"] = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
            older["status"]["phase"] = "Pending"
    else:
        older["spec"]["hard"] = {"limits.nvidia.com/gpumem": 1, "limits.nvidia.com/gpucores": 1}
    return older


def transient_objects(draw, placements):
    """Objects that come and go before the explain call (applied, then deleted)."""
    gone = []
    if chance(draw, 30):
        gone.append(existing_pod(draw, "gone", placements))
    if chance(draw, 15):
        gone.append(gpu_node(draw, "zulu")[0])
    if chance(draw, 15):
        gone.append(namespace_quota(draw, draw(NAMESPACE)))
        gone[-1]["metadata"]["name"] = "quota-gone"
        gone[-1]["metadata"]["uid"] = "uid-quota-gone"
    return gone


def operations(draw, objects, gone, with_history):
    """``[(verb, object)]`` whose end state is exactly ``objects``; per-object order is kept."""
    steps = []  # (object index, verb, object)
    for index, obj in enumerate(objects):
        if with_history and chance(draw, 30):
            steps.append((index, "apply", earlier_version(draw, obj)))
        steps.append((index, "apply", obj))
    for index, obj in enumerate(gone, start=len(objects)):
        steps.append((index, "apply", obj))
        steps.append((index, "delete", obj))
    shuffled = draw(st.permutations(steps))
    # keep each object's own steps in their original order
    queues = {}
    for index, verb, obj in steps:
        queues.setdefault(index, []).append((verb, obj))
    return [queues[index].pop(0) for index, _verb, _obj in shuffled]


@st.composite
def scenarios(draw, max_nodes=8, max_pods=12, annotations=None, with_history=False):
    """Everything one explain call needs, as one JSON-able dict; ``annotations`` are forced on the pod.

    ``operations`` is how the engine is fed; the oracle only sees the final ``nodes``, ``pods``
    and ``quotas``. With ``with_history`` older versions of objects and transient objects appear.
    """
    nodes, pods, quotas, placements = cluster(draw, max_nodes, max_pods)
    uuids = [d["id"] for _name, devices in placements for d in devices]
    gone = transient_objects(draw, placements) if with_history else []
    return {
        "nodes": nodes,
        "pods": pods,
        "quotas": quotas,
        "pod": new_pod(draw, uuids, pods, annotations),
        "now": draw(NOW),
        "node_policy": draw(NODE_POLICY_ARG),
        "gpu_policy": draw(GPU_POLICY_ARG),
        "operations": operations(draw, nodes + pods + quotas, gone, with_history),
    }

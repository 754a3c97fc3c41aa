"""Hypothesis strategies: random clusters (nodes, placed pods, quotas) and random pods to place."""

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
DEVMEMS = [1000, 8000, 15360, 16384, 32768, 40960, 81920]
PAIR_VALUES = [0, 10, 20, 30, 50, 60, 100, 120, 200, 600, 1800]
GPU_POLICIES = [
    "binpack", "spread", "mutex", "topology-aware", "numa", "binpack,numa", "spread,numa", "numa,binpack",
    "numa,spread", "binpack,mutex", "spread,topology-aware", "topology-aware,numa", "mutex,numa", "binpack,spread",
    "unknown",
]


# ---------------------------------------------------------------------------------------------
# quantities


@st.composite
def quantity(draw, value):
    """An integer as a JSON int or one of the Kubernetes spellings of the same number."""
    forms = [value, str(value)]
    if value and value % 1000 == 0:
        forms.append(f"{value // 1000}k")
    if value and value % 1024 == 0:
        forms.append(f"{value // 1024}Ki")
    forms.append(f"{value * 1000}m")
    return draw(st.sampled_from(forms))


def non_integer():
    return st.sampled_from(["1.5", "500m", "0.25", "2.5k"])


# ---------------------------------------------------------------------------------------------
# nodes


@st.composite
def gpu_device(draw, uuid, index):
    mode = draw(st.sampled_from(["hami-core"] * 6 + ["mps", ""] + ["mig"]))
    return gpu(
        uuid,
        index=index,
        count=draw(st.sampled_from([1, 2, 3, 4, 10, 10, 10])),
        devmem=draw(st.sampled_from(DEVMEMS)),
        devcore=draw(st.sampled_from([100] * 8 + [200, 50, 0])),
        type=draw(st.sampled_from(GPU_TYPES)),
        numa=draw(st.sampled_from([0, 0, 1, 1, 2])),
        mode=mode,
        health=draw(st.booleans().map(lambda unhealthy: not unhealthy) | st.just(True)),
    )


@st.composite
def pair_scores(draw, uuids):
    """Symmetric pair scores (§3.4) with some pairs left out."""
    table = {}
    for i, a in enumerate(uuids):
        for b in uuids[i + 1:]:
            if draw(st.integers(0, 4)):
                table[a, b] = table[b, a] = draw(st.sampled_from(PAIR_VALUES))
    return json.dumps([
        {"uuid": a, "score": {b: table[a, b] for b in uuids if (a, b) in table}} for a in uuids
    ], separators=(",", ":"))


@st.composite
def gpu_node(draw, name):
    """A node with 1-8 GPUs; sometimes cordons, pair scores, or a broken registration."""
    size = draw(st.integers(1, 8))
    devices = [draw(gpu_device(f"GPU-{name}-{k}", k)) for k in range(size)]
    uuids = [d["id"] for d in devices]
    annotations = {}
    if draw(st.integers(0, 5)) == 0:
        annotations["hami.io/device-cordon"] = ",".join(draw(st.lists(st.sampled_from(uuids), max_size=3)))
    if draw(st.integers(0, 2)) == 0:
        annotations["hami.io/node-nvidia-score"] = draw(pair_scores(uuids))
    broken = draw(st.integers(0, 14))
    if broken == 0:
        return node(name, annotations=annotations), devices
    if broken == 1:
        return node(name, register=draw(st.sampled_from(["[]", "not json", "{}"])), annotations=annotations), devices
    if broken == 2:
        annotations["hami.io/node-nvidia-score"] = "[{"
    return node(name, devices, annotations=annotations), devices


# ---------------------------------------------------------------------------------------------
# pods already placed by HAMi


@st.composite
def allocation_slot(draw, devices):
    if not devices or draw(st.integers(0, 3)) == 0:
        return ""
    picked = draw(st.lists(st.sampled_from(devices), min_size=1, max_size=min(3, len(devices)), unique_by=lambda d: d["id"]))
    entries = []
    for device in picked:
        uuid = device["id"] if draw(st.integers(0, 20)) else "GPU-unknown"
        mem = draw(st.integers(0, device.get("devmem", 0) // 2))
        cores = draw(st.sampled_from([0, 0, 10, 20, 30, 50, 100]))
        entries.append(f"{uuid},NVIDIA,{mem},{cores}:")
    return "".join(entries)


@st.composite
def existing_pod(draw, index, nodes):
    """A pod with valid ``hami.io/vgpu-devices-allocated`` on one of the nodes."""
    node_name, devices = draw(st.sampled_from(nodes))
    n_init = draw(st.sampled_from([0, 0, 0, 1, 2]))
    n_app = draw(st.integers(1, 3))
    slots = [draw(allocation_slot(devices)) for _ in range(n_init + n_app)]
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
        namespace=draw(st.sampled_from(NAMESPACES)),
        phase=draw(st.sampled_from(["Running"] * 5 + ["Pending", "Succeeded", "Failed", None])),
    )


@st.composite
def namespace_quota(draw, namespace):
    hard = {}
    if draw(st.booleans()):
        hard["limits.nvidia.com/gpumem"] = draw(st.sampled_from([0, 4000, 20000, 50000, 200000]).flatmap(quantity))
    if draw(st.booleans()):
        hard["limits.nvidia.com/gpucores"] = draw(st.sampled_from([0, 50, 100, 300, 1000]).flatmap(quantity))
    if draw(st.integers(0, 5)) == 0:
        hard["limits.nvidia.com/gpu"] = 1  # not tracked by HAMi
    return quota(f"quota-{namespace}", namespace, hard)


@st.composite
def clusters(draw, max_nodes=8, max_pods=12):
    """``(nodes, pods, quotas, all uuids)``: Node, placed Pod and ResourceQuota objects."""
    names = draw(st.lists(st.sampled_from(NODE_NAMES), min_size=1, max_size=max_nodes, unique=True))
    built = [draw(gpu_node(name)) for name in names]
    nodes = [n for n, _devices in built]
    placements = [(name, devices) for name, (_n, devices) in zip(names, built)]
    pods = [draw(existing_pod(i, placements)) for i in range(draw(st.integers(0, max_pods)))]
    quotas = [draw(namespace_quota(ns)) for ns in NAMESPACES if draw(st.integers(0, 2)) == 0]
    uuids = [d["id"] for _name, devices in placements for d in devices]
    return nodes, pods, quotas, uuids


# ---------------------------------------------------------------------------------------------
# the pod to place


@st.composite
def gpu_resources(draw):
    """Resources of one container: a mix of count / memory / percentage / cores, or nothing."""
    kind = draw(st.sampled_from(
        ["none", "bare", "mem", "mem", "pct", "mem+cores", "mem+cores", "pct+cores", "mem+pct", "mem-only",
         "cores-only", "pct-only", "requests", "odd"]
    ))
    nums = draw(st.sampled_from([1, 1, 1, 2, 2, 3, 4]))
    mem = draw(st.sampled_from([100, 1000, 2000, 3000, 4096, 8000, 16000, 30000, 50000]) | st.integers(0, 41000))
    pct = draw(st.sampled_from([0, 10, 25, 50, 50, 100]) | st.integers(1, 100))
    cores = draw(st.sampled_from([0, 10, 20, 30, 50, 100, 100]) | st.integers(0, 100))
    q = lambda value: draw(quantity(value))  # noqa: E731
    limits = {
        "none": {"cpu": "1"},
        "bare": {"nvidia.com/gpu": q(nums)},
        "mem": {"nvidia.com/gpu": q(nums), "nvidia.com/gpumem": q(mem)},
        "pct": {"nvidia.com/gpu": q(nums), "nvidia.com/gpumem-percentage": q(pct)},
        "mem+cores": {"nvidia.com/gpu": q(nums), "nvidia.com/gpumem": q(mem), "nvidia.com/gpucores": q(cores)},
        "pct+cores": {"nvidia.com/gpu": q(nums), "nvidia.com/gpumem-percentage": q(pct), "nvidia.com/gpucores": q(cores)},
        "mem+pct": {"nvidia.com/gpu": q(nums), "nvidia.com/gpumem": q(mem), "nvidia.com/gpumem-percentage": q(pct)},
        "mem-only": {"nvidia.com/gpumem": q(mem)},
        "cores-only": {"nvidia.com/gpucores": q(cores)},
        "pct-only": {"nvidia.com/gpumem-percentage": q(pct)},
        "requests": None,
        "odd": {"nvidia.com/gpu": draw(st.sampled_from([q(nums), 0, "1.5"])),
                "nvidia.com/gpumem": draw(st.sampled_from([q(mem), "1.5", -5, 2**31])),
                "nvidia.com/gpucores": draw(st.sampled_from([q(cores), 150, "2.5"]))},
    }[kind]
    requests = None
    if kind == "requests":
        requests = {"nvidia.com/gpu": q(nums)}
        if draw(st.booleans()):
            requests["nvidia.com/gpumem"] = q(mem)
        if draw(st.booleans()):
            requests["nvidia.com/gpucores"] = q(cores)
    return limits, requests


def comma_list(items):
    return st.lists(st.sampled_from(items), min_size=1, max_size=3).map(",".join)


@st.composite
def hint_annotations(draw, uuids, forced=None):
    annotations = {}
    optional = {
        "nvidia.com/use-gputype": comma_list(["V100", "a100", "T4", "nvidia", " A100 ", "P4"]) | st.just(""),
        "nvidia.com/nouse-gputype": comma_list(["V100", "a100", "t4", "Tesla", "P4"]),
        "nvidia.com/use-gpuuuid": comma_list(uuids + ["GPU-nowhere", " " + uuids[0]]) | st.just(""),
        "nvidia.com/nouse-gpuuuid": comma_list(uuids),
        "nvidia.com/numa-bind": st.sampled_from(["true", "true", "false", "True", "1", "yes"]),
        "nvidia.com/vgpu-mode": st.sampled_from(["hami-core", "mps", "hami-core,mps", "mig"]),
        "hami.io/node-scheduler-policy": st.sampled_from(["binpack", "spread", "other"]),
        "hami.io/gpu-scheduler-policy": st.sampled_from(GPU_POLICIES),
        "hami.io/device-scoring-weights": weights(),
    }
    for key, strategy in optional.items():
        if draw(st.integers(0, 7)) == 0:
            annotations[key] = draw(strategy)
    annotations.update(forced or {})
    return annotations


def weights():
    valid = st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)).filter(any).map(
        lambda w: f"slot={w[0]},core={w[1]},memory={w[2]}"
    )
    invalid = st.sampled_from(["slot=1,core=1", "slot=0,core=0,memory=0", "slot=-1,core=1,memory=1",
                               "slot=1,core=x,memory=1", "bogus"])
    return st.one_of(valid, valid, valid, invalid)


@st.composite
def new_pods(draw, uuids, existing, forced=None):
    """The pod to place: 1-3 containers, sometimes init containers and hint annotations."""
    n_init = draw(st.sampled_from([0, 0, 0, 0, 1, 2]))
    n_app = draw(st.integers(1, 3))
    init = [container(f"init{k}", *draw(gpu_resources())) for k in range(n_init)]
    apps = [container(f"app{k}", *draw(gpu_resources())) for k in range(n_app)]
    uid = None
    if existing and draw(st.integers(0, 9)) == 0:
        uid = draw(st.sampled_from(existing))["metadata"]["uid"]  # rescheduling: own usage released
    return pod(
        "new",
        apps,
        init_containers=init,
        namespace=draw(st.sampled_from(NAMESPACES)),
        uid=uid or "uid-new-pod",
        annotations=draw(hint_annotations(uuids or ["GPU-none"], forced)),
    )


@st.composite
def scenarios(draw, max_nodes=8, max_pods=12, annotations=None):
    """Everything one explain call needs (a dict, printed on failure); ``annotations`` are forced on the pod."""
    nodes, pods, quotas, uuids = draw(clusters(max_nodes, max_pods))
    return {
        "nodes": nodes,
        "pods": pods,
        "quotas": quotas,
        "pod": draw(new_pods(uuids, pods, annotations)),
        "now": draw(st.integers(1_600_000_000, 1_900_000_000)),
        "node_policy": draw(st.sampled_from([None, "binpack", "spread"])),
        "gpu_policy": draw(st.sampled_from([None, "binpack", "spread", "topology-aware", "mutex", "binpack,numa"])),
        "order": draw(st.permutations(range(len(nodes) + len(pods) + len(quotas)))),
    }

"""HAMi -> hami-fast -> HAMi on one real control plane with a node of every vendor family, each
registered as its device plugin registers it (JSON, colon/comma or capacity), among them Ascend 910B3
NPUs (shared, HAMi's node lock, the webhook's template rounding, NetworkID groups), Kunlunxin XPUs
(whole cards, no lock) and Cambricon MLUs (their own lock); both schedulers started with Ascend and
Iluvatar enabled as an operator would (opt-in, see conftest.py). After each phase, from API objects
alone: every pod bound and allocated on its vendor's node, no device over its memory or split count,
every earlier pod's node and device annotations untouched.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from controlplane import ApiError, wait_for
from sidebyside import (
    BIND_PHASE,
    FAST,
    HAMI,
    DevicePlugin,
    SideBySide,
    Watch,
    control_plane,
    create_namespace,
    create_pods,
    gpu_pod,
    list_pods,
    live_pods,
    log,
    parse_allocated,
)

CHIP = "Ascend910B3"
NPU_REGISTER = f"hami.io/node-register-{CHIP}"
NPU_ALLOCATED = f"hami.io/{CHIP}-devices-allocated"
NPU_MEM, NPU_CORES, NPU_SPLIT, NPUS = 65536, 20, 4, 8
XPU = "kunlunxin.com/xpu"
XPU_MEM, XPUS = 98304, 8
NPU_NODES, XPU_NODES = ["npu-0", "npu-1"], ["xpu-0", "xpu-1"]
ILUVATAR = "MR-V100"


@dataclass
class VendorNode:
    """A node as its vendor's device plugin registers it, and the devices HAMi makes of it."""

    name: str
    annotations: dict[str, str]
    capacity: dict[str, str]
    devices: dict[str, tuple[int, int]]  # id: (memory MiB, split count)
    labels: dict[str, str] = field(default_factory=dict)


def listed(name: str, chip: str, mem: int, cores: int, split: int, n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{name}-{i}",
            "index": i,
            "count": split,
            "devmem": mem,
            "devcore": cores,
            "type": chip,
            "numa": 0,
            "mode": "hami-core",
            "health": True,
        }
        for i in range(n)
    ]


def json_node(name: str, key: str, devices: list[dict[str, Any]], capacity: dict[str, str]) -> VendorNode:
    return VendorNode(name, {key: json.dumps(devices)}, capacity, {d["id"]: (d["devmem"], d["count"]) for d in devices})


def colon_node(name: str, key: str, devices: list[dict[str, Any]], capacity: dict[str, str]) -> VendorNode:
    fields = ("id", "count", "devmem", "devcore", "type", "numa", "health", "index", "mode")
    text = "".join(",".join(str(d[f]).lower() if f == "health" else str(d[f]) for f in fields) + ":" for d in devices)
    return VendorNode(name, {key: text}, capacity, {d["id"]: (d["devmem"], d["count"]) for d in devices})


def npu_node(name: str) -> VendorNode:
    npus = listed(name, CHIP, NPU_MEM, NPU_CORES, NPU_SPLIT, NPUS)
    for npu in npus:
        npu["custominfo"] = {"NetworkID": 0 if npu["index"] <= 3 else 1}
    return json_node(name, NPU_REGISTER, npus, {f"huawei.com/{CHIP}": str(NPUS)})


def derived(name: str, word: str, n: int, mem: int, split: int) -> dict[str, tuple[int, int]]:
    return {f"{name}-{word}-{i}": (mem, split) for i in range(n)}


def vendor_nodes() -> list[VendorNode]:
    """Every family hami-fast schedules, one node each (Ascend and Kunlunxin two)."""
    return [
        *(npu_node(n) for n in NPU_NODES),
        *(VendorNode(n, {}, {XPU: str(XPUS)}, derived(n, "kunlun", XPUS, XPU_MEM, 1)) for n in XPU_NODES),
        colon_node("dcu-0", "hami.io/node-dcu-register", listed("dcu-0", "DCU-Z100L", 32768, 100, 4, 2), {}),
        colon_node(
            "iluvatar-0", f"hami.io/node-{ILUVATAR}-register", listed("iluvatar-0", ILUVATAR, 32768, 100, 4, 2), {}
        ),
        json_node("biren-0", "hami.io/node-biren-register", listed("biren-0", "Biren-BR104P", 32768, 100, 4, 2), {}),
        json_node("vastai-0", "hami.io/node-va-register", listed("vastai-0", "Vastai-VA1", 16384, 100, 1, 4), {}),
        json_node(
            "amd-0",
            "hami.io/node-amd-register",
            listed("amd-0", "AMD-Instinct-MI210", 65536, 104, 4, 2),
            {"amd.com/gpu": "8"},
        ),
        VendorNode(
            "mlu-0",
            {},
            {
                "cambricon.com/mlu.smlu.vcore": "200",
                "cambricon.com/mlu.smlu.vmemory": "128",
                "cambricon.com/vmlu": "200",
            },
            derived("mlu-0", "cambricon-mlu", 2, 16384, 100),
        ),
        VendorNode(
            "mthreads-0",
            {},
            {"mthreads.com/sgpu-core": "32", "mthreads.com/sgpu-memory": "192", "mthreads.com/vgpu": "200"},
            derived("mthreads-0", "mthreads", 2, 49152, 100),
        ),
        VendorNode("metax-0", {}, {"metax-tech.com/gpu": "4"}, derived("metax-0", "metax", 4, 65536, 1)),
        VendorNode("gcu-0", {}, {"enflame.com/gcu": "4"}, derived("gcu-0", "GCU", 4, 100, 1)),
        drs_node("drs-0"),
        VendorNode(
            "neuron-0",
            {},
            {"aws.amazon.com/neuron": "4", "aws.amazon.com/neuroncore": "8"},
            derived("neuron-0", "AWSNeuron", 4, 0, 2),
            {"node.kubernetes.io/instance-type": "trn1.32xlarge"},
        ),
        sgpu_node("sgpu-0"),
    ]


def drs_node(name: str) -> VendorNode:
    """Enflame DRS: devices in slices and the profiles they are cut into (the plugin's JSON)."""
    profiles = {"1g.6gb": "0", "3g.20gb": "1", "6g.40gb": "2"}
    devices = [{"index": str(i), "minor": str(i), "capacity": 6} for i in range(2)]
    body = json.dumps({"devices": devices, "profiles": profiles})
    return VendorNode(name, {"enflame.com/gcu-drs-capacity": body}, {}, derived(name, "enflame-drs", 2, 40960, 6))


def sgpu_node(name: str) -> VendorNode:
    """MetaX sGPU: its plugin's own JSON list of cards, two MetaLink zones."""
    cards = [
        {
            "uuid": f"{name}-card-{i}",
            "bdf": f"0000:{i:02x}:00.0",
            "model": "MXC500",
            "totalDevCount": 8,
            "totalCompute": 100,
            "totalVRam": 65536,
            "numa": 0,
            "healthy": True,
            "linkZone": 1 + i // 2,
        }
        for i in range(4)
    ]
    devices = {c["uuid"]: (65536, 8) for c in cards}
    return VendorNode(
        name, {"metax-tech.com/node-gpu-devices": json.dumps(cards)}, {"metax-tech.com/sgpu": "32"}, devices
    )


# What each phase asks: shared NPU slices (the webhook rounds 6000 MiB up to a template), a whole
# NPU pair, whole Kunlunxin cards in the counts their interconnect allows, and a pod of every other family.
PHASE_PODS: list[tuple[str, dict[str, Any]]] = [
    ("npu-slice", {f"huawei.com/{CHIP}": 1, f"huawei.com/{CHIP}-memory": 6000}),
    ("npu-slice", {f"huawei.com/{CHIP}": 1, f"huawei.com/{CHIP}-memory": 6000}),
    ("npu-slice", {f"huawei.com/{CHIP}": 1, f"huawei.com/{CHIP}-memory": 20000}),
    ("npu-pair", {f"huawei.com/{CHIP}": 2}),
    ("xpu-one", {XPU: 1}),
    ("xpu-one", {XPU: 1}),
    ("xpu-two", {XPU: 2}),
    ("dcu", {"hygon.com/dcunum": 1, "hygon.com/dcumem": 4096, "hygon.com/dcucores": 30}),
    ("iluvatar", {f"iluvatar.ai/{ILUVATAR}-vgpu": 1, f"iluvatar.ai/{ILUVATAR}.vMem": 16}),
    ("biren", {"birentech.com/gpu": 1}),
    ("vastai", {"vastaitech.com/va": 1}),
    ("amd", {"amd.com/gpu": 1, "amd.com/gpumem": 8192, "amd.com/gpucores": 30}),
    ("mlu", {"cambricon.com/vmlu": 1, "cambricon.com/mlu.smlu.vmemory": 8, "cambricon.com/mlu.smlu.vcore": 25}),
    ("mthreads", {"mthreads.com/vgpu": 1, "mthreads.com/sgpu-memory": 4}),
    ("metax", {"metax-tech.com/gpu": 1}),
    ("gcu", {"enflame.com/gcu": 1}),
    ("drs", {"enflame.com/drs-gcu": 1}),
    ("neuron", {"aws.amazon.com/neuroncore": 1}),
    ("sgpu", {"metax-tech.com/sgpu": 1, "metax-tech.com/vmemory": 4, "metax-tech.com/vcore": 20}),
]
CAMBRICON_LOCK = "cambricon.com/dsmlu.lock"
# The vendors' own annotations naming the devices a pod holds, beside HAMi's lists.
VENDOR_DEVICE_KEYS = (
    f"huawei.com/{CHIP}",
    "BAIDU_COM_DEVICE_IDX",
    "AWS_NEURON_IDS",
    "enflame.com/gcu-assigned-index",
    "assigned-containers",
    "metax-tech.com/gpu-devices-allocated",
)


def device_keys(annotations: dict[str, str]) -> dict[str, str]:
    """The annotations that say which devices a pod holds, whatever its vendor."""
    return {
        k: v
        for k, v in annotations.items()
        if (k.startswith("hami.io/") and k.endswith("allocated")) or k in VENDOR_DEVICE_KEYS
    }


def register(api, node: VendorNode) -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {"kubernetes.io/hostname": node.name, "pool": "vendor", **node.labels},
            "annotations": node.annotations,
        },
    }
    api.create("/api/v1/nodes", obj)
    api.patch(f"/api/v1/nodes/{node.name}", {"spec": {"taints": None}})
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "250", **node.capacity}
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now}
    status = {"capacity": capacity, "allocatable": capacity, "conditions": [{**ready, "lastTransitionTime": now}]}
    api.patch(f"/api/v1/nodes/{node.name}/status", {"status": status})


class HandshakeAnswer:
    """The device plugins' side of HAMi's handshake: any `hami.io/node-handshake-*` at
    `Requesting_<t>` answered `Reported_<now>`."""

    def __init__(self, api) -> None:
        self.api = api
        self.watch = Watch(api, "/api/v1/nodes", self._on_node)

    def _on_node(self, kind: str, obj: dict) -> None:
        annotations = obj["metadata"].get("annotations") or {}
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        answers = {
            k: f"Reported_{stamp}"
            for k, v in annotations.items()
            if k.startswith("hami.io/node-handshake") and v.startswith("Requesting_")
        }
        if kind != "DELETED" and answers:
            self.api.patch(f"/api/v1/nodes/{obj['metadata']['name']}", {"metadata": {"annotations": answers}})


class VendorPlugins(DevicePlugin):
    """The stand-in device plugin, also releasing Cambricon's own node lock after Allocate."""

    def _allocate(self, namespace: str, name: str, node: str) -> None:
        super()._allocate(namespace, name, node)
        if node.startswith("mlu-"):
            self.api.patch(f"/api/v1/nodes/{node}", {"metadata": {"annotations": {CAMBRICON_LOCK: None}}})


@pytest.fixture(scope="module")
def vendors(e2e_workdir, require_side_by_side):
    cp = control_plane(e2e_workdir("vendor-switch"))
    plugin = answer = None
    try:
        cp.start()
        s = SideBySide(
            cp,
            qps=100,
            burst=200,
            values={"devices.ascend.enabled": True, "devices.iluvatar.enabled": True},
            hami_args=["--enable-ascend=true", "--enable-iluvatar=true"],
        )
        s.setup()
        answer = HandshakeAnswer(cp.api)
        answer.watch.start()
        s.vendor_nodes = vendor_nodes()
        for node in s.vendor_nodes:
            register(cp.api, node)
        plugin = VendorPlugins(cp.api, delay=0.2).start()
        s.plugin = plugin
        yield s
    finally:
        for stoppable in (plugin, answer and answer.watch):
            if stoppable:
                stoppable.stop()
        cp.stop()


def overcommitted(api, nodes: list[VendorNode]) -> list[str]:
    """Every device over its memory or split count, from the pods' device annotations alone."""
    capacity = {uuid: cap for node in nodes for uuid, cap in node.devices.items()}
    used: dict[str, list[int]] = {}
    for pod in live_pods(list_pods(api)):
        for key, value in device_keys(pod["metadata"].get("annotations") or {}).items():
            if key.startswith("hami.io/"):
                for container in parse_allocated(value):
                    for uuid, _typ, mem, _cores in container:
                        used.setdefault(uuid, []).append(mem)
    bad = [f"{uuid}: not a registered device" for uuid in used if uuid not in capacity]
    for uuid, mems in used.items():
        mem, split = capacity.get(uuid, (0, 0))
        if sum(mems) > mem or len(mems) > split:
            bad.append(f"{uuid}: {sum(mems)}/{mem} MiB, {len(mems)}/{split} pods")
    return bad


def held(api, namespaces: list[str]) -> dict[str, tuple]:
    out = {}
    for ns in namespaces:
        for pod in live_pods(list_pods(api, ns)):
            devices = device_keys(pod["metadata"].get("annotations") or {})
            out[f"{ns}/{pod['metadata']['name']}"] = (pod["spec"]["nodeName"], tuple(sorted(devices.items())))
    return out


def all_allocated(api, namespace: str, n: int) -> bool:
    pods = list_pods(api, namespace)
    return sum((p["metadata"].get("annotations") or {}).get(BIND_PHASE) == "success" for p in pods) == n


def check_placed(which: str, pod: dict) -> None:
    name, annotations = pod["metadata"]["name"], pod["metadata"].get("annotations") or {}
    assert any(k.startswith("hami.io/") for k in device_keys(annotations)), (which, name, annotations)
    kind = name.rsplit("-", 1)[0]
    node = pod["spec"]["nodeName"]
    assert node.split("-")[0] in kind or kind.split("-")[0] in node, (which, name, node)
    rounded = {"npu-slice": ("16384", "32768"), "npu-pair": (str(NPU_MEM),)}  # several NPUs: whole cards
    if kind in rounded:
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert limits[f"huawei.com/{CHIP}-memory"] in rounded[kind], (which, name, limits)


def phase(s: SideBySide, which: str, namespace: str, earlier: dict[str, tuple]) -> dict[str, tuple]:
    s.use(which)
    create_namespace(s.api, namespace)
    pods = [
        gpu_pod(f"{kind}-{i}", namespace, limits, node_selector={"pool": "vendor"})
        for i, (kind, limits) in enumerate(PHASE_PODS)
    ]
    started = time.monotonic()
    create_pods(s.api, pods)
    wait_for(f"{namespace}: every pod bound and allocated", lambda: all_allocated(s.api, namespace, len(pods)), 300, 1)
    log(f"{which}: {len(pods)} pods of every vendor bound and allocated in {time.monotonic() - started:.1f}s")
    for pod in list_pods(s.api, namespace):
        check_placed(which, pod)
    assert overcommitted(s.api, s.vendor_nodes) == []
    namespaces = sorted({k.split("/")[0] for k in earlier})
    still = held(s.api, namespaces)
    assert {k: still.get(k) for k in earlier} == earlier, "a running pod's node or devices changed"
    return held(s.api, [*namespaces, namespace])


def test_switch_to_hami_fast_and_back_with_every_vendor_disturbs_nothing(vendors) -> None:
    state: dict[str, tuple] = {}
    state = phase(vendors, HAMI, "vendors-1-hami", state)
    vendors.restart(FAST)  # the incoming scheduler starts from the API alone
    state = phase(vendors, FAST, "vendors-2-hami-fast", state)
    vendors.restart(HAMI)
    state = phase(vendors, HAMI, "vendors-3-hami", state)
    assert len(state) == 3 * len(PHASE_PODS)
    nodes = {node for node, _ in state.values()}
    assert set(NPU_NODES) & nodes and set(XPU_NODES) & nodes, nodes


def failed_scheduling(api, namespace: str, name: str) -> list[str]:
    events = api.get(f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.name%3D{name}")["items"]
    return sorted({e["message"] for e in events if e["reason"] == "FailedScheduling"})


@pytest.mark.parametrize(
    ("case", "limits"),
    [
        ("npus", {f"huawei.com/{CHIP}": 9}),
        ("npu-memory", {f"huawei.com/{CHIP}": 1, f"huawei.com/{CHIP}-memory": 70000}),
        ("xpus", {XPU: 3}),
        ("neuron-devices", {"aws.amazon.com/neuron": 5}),
        ("drs-slices", {"enflame.com/drs-gcu": 5}),
        ("sgpu-memory", {"metax-tech.com/sgpu": 1, "metax-tech.com/vmemory": 100}),
    ],
)
def test_a_vendor_pod_that_fits_nowhere_gets_the_same_answer_from_both(vendors, case, limits) -> None:
    """The webhook's verdict (a memory above every template is refused) or kube-scheduler's event."""
    ns = "vendor-fits-nowhere"
    create_namespace(vendors.api, ns)
    answers = {}
    for which in (HAMI, FAST):
        vendors.use(which)
        name = f"{which}-{case}"
        pod = gpu_pod(name, ns, limits, node_selector={"pool": "vendor"})
        try:
            vendors.api.create(f"/api/v1/namespaces/{ns}/pods", pod)
        except ApiError as exc:
            answers[which] = f"refused {exc.status}: {json.loads(exc.body).get('message')}"
            continue
        answers[which] = wait_for(f"{name}: FailedScheduling", lambda n=name: failed_scheduling(vendors.api, ns, n), 60)
        vendors.api.delete(f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0")
    log(f"fits nowhere {limits}: {answers}")
    assert answers[FAST] == answers[HAMI]

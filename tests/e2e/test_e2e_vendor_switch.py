"""HAMi -> hami-fast -> HAMi on one real control plane with Ascend 910B3 NPUs (shared, HAMi's node
lock, the webhook's template rounding, NetworkID groups) and Kunlunxin XPUs (whole cards from
capacity, no lock), both schedulers started with Ascend enabled as an operator would (opt-in, see
conftest.py). After each phase, from API objects alone: every pod bound and allocated, no device over
its memory or split count, every earlier pod's node and device annotations untouched.
"""

from __future__ import annotations

import json
import threading
import time
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
NPU_HANDSHAKE = f"hami.io/node-handshake-{CHIP}"
NPU_ALLOCATED = f"hami.io/{CHIP}-devices-allocated"
NPU_MEM, NPU_CORES, NPU_SPLIT, NPUS = 65536, 20, 4, 8
XPU = "kunlunxin.com/xpu"
XPU_ALLOCATED = "hami.io/kunlun-allocated"
XPU_MEM, XPUS = 98304, 8
NPU_NODES, XPU_NODES = ["npu-0", "npu-1"], ["xpu-0", "xpu-1"]
# What each phase asks: shared NPU slices (the webhook rounds 6000 MiB up to a template), a whole
# NPU pair, and whole Kunlunxin cards in the counts their interconnect allows.
PHASE_PODS: list[tuple[str, dict[str, Any]]] = [
    ("npu-slice", {f"huawei.com/{CHIP}": 1, f"huawei.com/{CHIP}-memory": 6000}),
    ("npu-slice", {f"huawei.com/{CHIP}": 1, f"huawei.com/{CHIP}-memory": 6000}),
    ("npu-slice", {f"huawei.com/{CHIP}": 1, f"huawei.com/{CHIP}-memory": 20000}),
    ("npu-pair", {f"huawei.com/{CHIP}": 2}),
    ("xpu-one", {XPU: 1}),
    ("xpu-one", {XPU: 1}),
    ("xpu-two", {XPU: 2}),
]
DEVICE_KEYS = (NPU_ALLOCATED, f"huawei.com/{CHIP}", XPU_ALLOCATED, "BAIDU_COM_DEVICE_IDX")


def npu_node(name: str) -> dict[str, Any]:
    npus = [
        {
            "id": f"{name}-npu-{i}",
            "index": i,
            "count": NPU_SPLIT,
            "devmem": NPU_MEM,
            "devcore": NPU_CORES,
            "type": CHIP,
            "numa": 0,
            "health": True,
            "custominfo": {"NetworkID": 0 if i <= 3 else 1},
        }
        for i in range(NPUS)
    ]
    return node(name, {NPU_REGISTER: json.dumps(npus)}, {f"huawei.com/{CHIP}": str(NPUS)})


def node(name: str, annotations: dict[str, str], devices: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "pool": "vendor"},
            "annotations": annotations,
        },
        "capacity": {"cpu": "64", "memory": "512Gi", "pods": "250", **devices},
    }


def register(api, obj: dict[str, Any]) -> None:
    capacity = obj.pop("capacity")
    name = obj["metadata"]["name"]
    api.create("/api/v1/nodes", obj)
    api.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now}
    status = {"capacity": capacity, "allocatable": capacity, "conditions": [{**ready, "lastTransitionTime": now}]}
    api.patch(f"/api/v1/nodes/{name}/status", {"status": status})


class HandshakeAnswer:
    """The Ascend plugin's side of HAMi's handshake: `Requesting_<t>` answered `Reported_<now>`."""

    def __init__(self, api) -> None:
        self.api = api
        self.watch = Watch(api, "/api/v1/nodes", self._on_node)
        self.lock = threading.Lock()

    def _on_node(self, kind: str, obj: dict) -> None:
        value = (obj["metadata"].get("annotations") or {}).get(NPU_HANDSHAKE, "")
        if kind != "DELETED" and value.startswith("Requesting_"):
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
            with self.lock:
                self.api.patch(
                    f"/api/v1/nodes/{obj['metadata']['name']}",
                    {"metadata": {"annotations": {NPU_HANDSHAKE: f"Reported_{stamp}"}}},
                )


@pytest.fixture(scope="module")
def vendors(e2e_workdir, require_side_by_side):
    cp = control_plane(e2e_workdir("vendor-switch"))
    plugin = answer = None
    try:
        cp.start()
        s = SideBySide(
            cp, qps=100, burst=200, values={"devices.ascend.enabled": True}, hami_args=["--enable-ascend=true"]
        )
        s.setup()
        answer = HandshakeAnswer(cp.api)
        answer.watch.start()
        for name in NPU_NODES:
            register(cp.api, npu_node(name))
        for name in XPU_NODES:
            register(cp.api, node(name, {}, {XPU: str(XPUS)}))
        plugin = DevicePlugin(cp.api, delay=0.2).start()
        s.plugin = plugin
        yield s
    finally:
        for stoppable in (plugin, answer and answer.watch):
            if stoppable:
                stoppable.stop()
        cp.stop()


def device_capacity(api) -> dict[str, tuple[int, int]]:
    """{device id: (memory, split)} as both schedulers register them."""
    out: dict[str, tuple[int, int]] = {}
    for n in api.get("/api/v1/nodes")["items"]:
        name, annotations = n["metadata"]["name"], n["metadata"].get("annotations") or {}
        for d in json.loads(annotations.get(NPU_REGISTER) or "[]"):
            out[d["id"]] = (d["devmem"], d["count"])
        for i in range(int((n["status"].get("capacity") or {}).get(XPU, "0"))):
            out[f"{name}-kunlun-{i}"] = (XPU_MEM, 1)
    return out


def overcommitted(api) -> list[str]:
    capacity = device_capacity(api)
    used: dict[str, list[int]] = {}
    for pod in live_pods(list_pods(api)):
        annotations = pod["metadata"].get("annotations") or {}
        for key in (NPU_ALLOCATED, XPU_ALLOCATED):
            for container in parse_allocated(annotations.get(key, "")):
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
            annotations = pod["metadata"].get("annotations") or {}
            devices = tuple(annotations.get(k, "") for k in DEVICE_KEYS)
            out[f"{ns}/{pod['metadata']['name']}"] = (pod["spec"]["nodeName"], devices)
    return out


def all_allocated(api, namespace: str, n: int) -> bool:
    pods = list_pods(api, namespace)
    return sum((p["metadata"].get("annotations") or {}).get(BIND_PHASE) == "success" for p in pods) == n


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
    log(f"{which}: {len(pods)} Ascend and Kunlunxin pods bound and allocated in {time.monotonic() - started:.1f}s")
    for pod in list_pods(s.api, namespace):
        annotations = pod["metadata"].get("annotations") or {}
        asked_npu = any(CHIP in k for c in pod["spec"]["containers"] for k in c["resources"].get("limits", {}))
        assert annotations.get(NPU_ALLOCATED if asked_npu else XPU_ALLOCATED), (which, pod["metadata"]["name"])
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        rounded = {"npu-slice": ("16384", "32768"), "npu-pair": (str(NPU_MEM),)}  # several NPUs: whole cards
        kind = pod["metadata"]["name"].rsplit("-", 1)[0]
        if kind in rounded:
            assert limits[f"huawei.com/{CHIP}-memory"] in rounded[kind], (which, pod["metadata"]["name"], limits)
    assert overcommitted(s.api) == []
    namespaces = sorted({k.split("/")[0] for k in earlier})
    still = held(s.api, namespaces)
    assert {k: still.get(k) for k in earlier} == earlier, "a running pod's node or devices changed"
    return held(s.api, [*namespaces, namespace])


def test_switch_to_hami_fast_and_back_with_ascend_and_kunlunxin_disturbs_nothing(vendors) -> None:
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

"""HAMi's real scheduler binary and hami-fast side by side on one real control plane.

Both schedulers run and watch the same cluster all the time; which one schedules is decided by the
two objects an operator changes to switch: the MutatingWebhookConfiguration (from hami-fast's chart)
and kube-scheduler's KubeSchedulerConfiguration (from the chart, extender URL pointed at the chosen
binary; kube-scheduler restarted with it). HAMi's binary runs with its own chart's flags, RBAC and
device config (`<shared>/tools/hami-scheduler`, never copied into the repo), as its own
ServiceAccount; hami-fast with its chart's flags as its ServiceAccount; kube-scheduler as
system:kube-scheduler, so the audit log tells the three apart.

Single replica, so leader election is off for all three (HAMi only counts as leader when
kube-scheduler's Lease holder carries its hostname; see the tool's README).

Also here: nodes registered as HAMi's device plugin registers them, a device-plugin stand-in
(`DevicePlugin`: after an Allocate delay it sets `hami.io/bind-phase: success` and releases the
node lock), KWOK for fake nodes at scale, and checks that read only API objects.
"""

from __future__ import annotations

import base64
import collections
import copy
import heapq
import http.client
import json
import os
import re
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from controlplane import (
    ROOT,
    SA_USER,
    ApiError,
    ControlPlane,
    KubeApi,
    Proc,
    cache_dir,
    free_port,
    render_chart,
    wait_for,
    with_local_device_config,
)

SHARED_DIR = Path(os.environ.get("HAMI_FAST_SHARED", ROOT.parent / "shared"))
HAMI_DIR = Path(os.environ.get("HAMI_SCHEDULER_DIR", SHARED_DIR / "tools" / "hami-scheduler"))
HAMI_NS, HAMI_SA = "kube-system", "hami-scheduler"
HAMI_USER = f"system:serviceaccount:{HAMI_NS}:{HAMI_SA}"
KS_USER = "system:kube-scheduler"
KWOK_VERSION = os.environ.get("KWOK_VERSION", "v0.8.0")
HAMI, FAST = "hami", "hami-fast"
# Users of their own, so the audit log tells KWOK and the device-plugin stand-in apart from the test.
KWOK_USER, PLUGIN_USER, ADMIN_USER = "e2e-kwok", "e2e-device-plugin", "e2e-admin"
PROTOCOL_USER = "e2e-protocol-writes"

LOCK = "hami.io/mutex.lock"
ALLOCATED = "hami.io/vgpu-devices-allocated"
BIND_PHASE = "hami.io/bind-phase"
REGISTER = "hami.io/node-nvidia-register"
GPU_MEM, GPU_CORES, GPU_SPLIT, GPU_TYPE = 16384, 100, 10, "NVIDIA-Tesla T4"


def hami_missing() -> str | None:
    binary = HAMI_DIR / "hami-scheduler"
    if not os.access(binary, os.X_OK):
        return (
            f"HAMi's scheduler binary not found at {binary}: it lives in <repo>/../shared/tools/hami-scheduler "
            "(override with HAMI_SCHEDULER_DIR or HAMI_FAST_SHARED)"
        )
    return None


def kwok_binary() -> Path:
    return Path(os.environ.get("KWOK_BIN", cache_dir() / "bin" / f"kwok-{KWOK_VERSION}" / "kwok"))


def kwok_missing() -> str | None:
    path = kwok_binary()
    return None if os.access(path, os.X_OK) else f"kwok not found at {path} (run scripts/build-kwok.sh)"


def log(message: str) -> None:
    print(f"[e2e {time.strftime('%H:%M:%S')}] {message}", flush=True)


class KeepAliveApi(KubeApi):
    """KubeApi over one persistent HTTPS connection per thread, as client-go keeps its connections:
    a new TLS handshake per call would make the test's own calls (creating pods, the device-plugin
    stand-in) cost the API server more than a real client does, and skew what is measured."""

    def __init__(self, server: str, token: str, ca_file: str) -> None:
        super().__init__(server, token, ca_file)
        parsed = urllib.parse.urlsplit(server)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 443
        self._local = threading.local()
        self._all: list[http.client.HTTPSConnection] = []
        self._guard = threading.Lock()

    def _connection(self) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
            self._local.conn = conn
            with self._guard:
                self._all.append(conn)
        return conn

    def close(self) -> None:
        """Close every thread's connection (threads that made calls may be gone already)."""
        with self._guard:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": content_type, "Accept": "application/json"}
        for attempt in range(2):
            conn = self._connection()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                text = resp.read().decode()
                break
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        if resp.status >= 300:
            raise ApiError(resp.status, text)
        return json.loads(text) if text and text[0] in "{[" else text


def user_api(cp: ControlPlane, user: str) -> KeepAliveApi:
    return KeepAliveApi(cp.server, cp.tokens[user], str(cp.ca_file))


# -- nodes, as HAMi's device plugin registers them ----------------------------------------------
def node_object(name: str, gpus: int = 2, labels: dict[str, str] | None = None, kwok: bool = False) -> dict[str, Any]:
    devices = [
        {
            "id": f"GPU-{name}-{g}",
            "index": g,
            "count": GPU_SPLIT,
            "devmem": GPU_MEM,
            "devcore": GPU_CORES,
            "type": GPU_TYPE,
            "mode": "hami-core",
            "health": True,
        }
        for g in range(gpus)
    ]
    annotations = {REGISTER: json.dumps(devices)}
    if kwok:
        annotations["kwok.x-k8s.io/node"] = "fake"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "gpu": "on", **(labels or {})},
            "annotations": annotations,
        },
    }


def node_status(gpus: int) -> dict[str, Any]:
    res = {"cpu": "64", "memory": "512Gi", "pods": "250", "nvidia.com/gpu": str(gpus * GPU_SPLIT)}
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "no kubelet",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    return {"status": {"capacity": res, "allocatable": res, "conditions": [ready]}}


def register_node(api: KubeApi, name: str, gpus: int = 2, labels: dict[str, str] | None = None, kwok: bool = False):
    api.create("/api/v1/nodes", node_object(name, gpus, labels, kwok))
    # TaintNodesByCondition gives new nodes node.kubernetes.io/not-ready; no node controller lifts it.
    api.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
    api.patch(f"/api/v1/nodes/{name}/status", node_status(gpus))


def register_nodes(api: KubeApi, names: list[str], gpus: int, labels=None, kwok=False, threads: int = 16) -> None:
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda n: register_node(api, n, gpus, labels, kwok), names))


# -- pods ---------------------------------------------------------------------------------------
def gpu_pod(name: str, namespace: str, limits: dict[str, Any], node_selector=None, annotations=None) -> dict:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "main", "image": "cuda:e2e", "resources": {"limits": {k: str(v) for k, v in limits.items()}}}
            ],
        },
    }
    if node_selector:
        pod["spec"]["nodeSelector"] = dict(node_selector)
    return pod


def plain_pod(name: str, namespace: str, scheduler: str = "hami-scheduler") -> dict:
    """No GPU resource: kube-scheduler never calls the extender for it (managedResources)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox:e2e"}],
        },
    }


# A realistic mix: fractional memory, memory + cores, a memory percentage, a whole card, two GPUs.
MIX: list[tuple[str, dict[str, Any], int]] = [
    ("mem", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}, 35),
    ("memcores", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000, "nvidia.com/gpucores": 30}, 25),
    ("pct", {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 25}, 15),
    ("whole", {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 100, "nvidia.com/gpucores": 100}, 15),
    ("multi", {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 6000, "nvidia.com/gpucores": 20}, 10),
]


def mixed_limits(i: int) -> tuple[str, dict[str, Any]]:
    """The i-th pod of the mix, spread evenly (a deterministic interleaving by weight)."""
    slot = (i * 37) % 100
    for kind, limits, weight in MIX:
        if slot < weight:
            return kind, limits
        slot -= weight
    return MIX[0][0], MIX[0][1]


def create_namespace(api: KubeApi, name: str) -> None:
    api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, True)


def create_pods(api: KubeApi, pods: list[dict], threads: int = 16) -> dict[str, float]:
    """POST every pod (through the webhook); returns each pod's client-side creation time."""
    created: dict[str, float] = {}

    def one(pod: dict) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        created[f"{ns}/{name}"] = time.time()
        api.create(f"/api/v1/namespaces/{ns}/pods", pod)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, pods))
    return created


def delete_pods(api: KubeApi, namespace: str, wait: float = 300) -> None:
    """Delete every pod of the namespace and wait until they are gone. A collection DELETE of thousands
    of pods can outlast the request's timeout on a busy API server and then stop half-way: re-issue
    it until the namespace is empty."""
    deadline = time.monotonic() + wait

    def empty() -> bool:
        return not api.get(f"/api/v1/namespaces/{namespace}/pods?limit=1")["items"]

    while True:
        try:
            api.request("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
        except TimeoutError:
            log(f"deleting the pods of {namespace} outlasted the request's timeout; deleting the rest again")
        try:
            wait_for(f"pods in {namespace} deleted", empty, min(30, max(1, deadline - time.monotonic())), 1)
            return
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise


def list_pods(api: KubeApi, namespace: str | None = None) -> list[dict]:
    base = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    items, token = [], ""
    while True:
        page = api.get(base + "?limit=1000" + (f"&continue={urllib.parse.quote(token)}" if token else ""))
        items += page["items"]
        token = page["metadata"].get("continue", "")
        if not token:
            return items


# -- watching -----------------------------------------------------------------------------------
class Watch(threading.Thread):
    """LIST then WATCH a collection with the admin token; `on_event(type, obj)` for each event."""

    def __init__(self, api: KubeApi, path: str, on_event: Callable[[str, dict], None]) -> None:
        super().__init__(name=f"watch{path}", daemon=True)
        self.api, self.path, self.on_event = api, path, on_event
        self.stopped = threading.Event()
        self.synced = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                listed = self.api.get(self.path)
                for obj in listed["items"]:
                    self.on_event("ADDED", obj)
                self.synced.set()
                self._stream(listed["metadata"]["resourceVersion"])
            except Exception as exc:  # noqa: BLE001 - a watch in a test helper retries on anything
                if not self.stopped.is_set():
                    log(f"watch {self.path}: {exc!r}; re-listing")
                    time.sleep(0.5)

    def _stream(self, version: str) -> None:
        sep = "&" if "?" in self.path else "?"
        url = f"{self.api.server}{self.path}{sep}watch=1&allowWatchBookmarks=true&resourceVersion={version}"
        url += "&timeoutSeconds=600"
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.api.token}"})
        with urllib.request.urlopen(req, context=self.api.ctx, timeout=700) as resp:
            for line in resp:
                if self.stopped.is_set():
                    return
                event = json.loads(line)
                if event["type"] == "ERROR":
                    return
                if event["type"] != "BOOKMARK":
                    self.on_event(event["type"], event["object"])

    def stop(self) -> None:
        self.stopped.set()


class DevicePlugin:
    """What HAMi's device plugin does after a Bind: Allocate (here: wait `delay` seconds), then set
    `hami.io/bind-phase: success` on the pod and release the node lock if that pod holds it."""

    def __init__(self, api: KubeApi, delay: float = 0.0, threads: int = 48) -> None:
        self.api, self.delay = api, delay
        self.seen: set[str] = set()
        self.allocated = 0
        self.finished: dict[str, float] = {}  # ns/name: when its Allocate was done (Unix seconds)
        self._heap: list[tuple[float, str, str, str]] = []
        self._cond = threading.Condition()
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="device-plugin")
        self.watch = Watch(api, "/api/v1/pods", self._on_pod)
        self._timer = threading.Thread(target=self._run, daemon=True)
        self._stopped = False

    def start(self) -> DevicePlugin:
        self.watch.start()
        self._timer.start()
        self.watch.synced.wait(30)
        return self

    def stop(self) -> None:
        self.watch.stop()
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if isinstance(self.api, KeepAliveApi):
            self.api.close()

    def _on_pod(self, kind: str, pod: dict) -> None:
        meta = pod["metadata"]
        node = pod["spec"].get("nodeName")
        phase = (meta.get("annotations") or {}).get(BIND_PHASE)
        key = f"{meta['namespace']}/{meta['name']}"
        if kind == "DELETED" or not node or phase != "allocating" or key in self.seen:
            return
        self.seen.add(key)
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + self.delay, meta["namespace"], meta["name"], node))
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    _, ns, name, node = heapq.heappop(self._heap)
                    self._pool.submit(self._allocate, ns, name, node)
                self._cond.wait(self._heap[0][0] - now if self._heap else None)

    def _allocate(self, namespace: str, name: str, node: str) -> None:
        # HAMi's plugin reads the node, checks the lock names this pod, then updates the node. Here the
        # lock can only be this pod's: it was taken for this pod's bind and nothing else releases it
        # once the pod is bound (no expiry within a test, no deleted owners), so one merge patch
        # drops it. That keeps the stand-in at 2 calls per pod, as cheap as a real per-node plugin.
        try:
            self.api.patch(
                f"/api/v1/namespaces/{namespace}/pods/{name}",
                {"metadata": {"annotations": {BIND_PHASE: "success"}}},
            )
            self.api.patch(f"/api/v1/nodes/{node}", {"metadata": {"annotations": {LOCK: None}}})
            self.allocated += 1
            self.finished[f"{namespace}/{name}"] = time.time()
        except Exception as exc:  # noqa: BLE001 - a deleted pod is fine; anything else is logged
            if not (isinstance(exc, ApiError) and exc.status == 404):
                log(f"device plugin: {namespace}/{name} on {node}: {exc!r}")


class ProtocolWrites:
    """HAMi's per-pod writes without any scheduler logic, for plain pods kube-scheduler binds alone:
    the floor of the protocol on this machine. When a pod appears: Filter's annotation patch and its
    FilteringSucceed event; when it is bound: the node lock (GET, then a merge patch guarded by the
    resourceVersion, as HAMi's SetNodeLock), the `bind-phase: allocating` patch and BindingSucceed.
    The binding itself is kube-scheduler's; the device-plugin stand-in then does its two writes."""

    def __init__(self, api: KubeApi, namespace: str, threads: int = 32) -> None:
        self.api = api
        self.filtered: set[str] = set()
        self.locked: set[str] = set()
        self.errors = 0
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="protocol")
        self.watch = Watch(api, f"/api/v1/namespaces/{namespace}/pods", self._on_pod)
        self.watch.start()
        self.watch.synced.wait(30)

    def _on_pod(self, kind: str, pod: dict) -> None:
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if kind == "DELETED":
            return
        if key not in self.filtered:
            self.filtered.add(key)
            self._pool.submit(self._guarded, self._filter, meta)
        node = pod["spec"].get("nodeName")
        if node and key not in self.locked:
            self.locked.add(key)
            self._pool.submit(self._guarded, self._bind, meta, node)

    def _guarded(self, step: Callable[..., None], *args: Any) -> None:
        try:
            step(*args)
        except Exception as exc:  # noqa: BLE001 - counted and logged, the measurement goes on
            self.errors += 1
            log(f"protocol writes: {exc!r}")

    def _event(self, meta: dict, reason: str, message: str) -> None:
        ns, name = meta["namespace"], meta["name"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.api.create(
            f"/api/v1/namespaces/{ns}/events",
            {
                "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": ns},
                "involvedObject": {"kind": "Pod", "namespace": ns, "name": name, "uid": meta["uid"]},
                "reason": reason,
                "message": message,
                "type": "Normal",
                "source": {"component": "hami-scheduler"},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            },
        )

    def _filter(self, meta: dict) -> None:
        ns, name = meta["namespace"], meta["name"]
        node = "kwok-00000"  # the annotation's size matters here, not its node
        devices = f"GPU-{node}-0,NVIDIA,3000,30:;"
        annotations = {
            "hami.io/vgpu-node": node,
            "hami.io/vgpu-time": str(int(time.time())),
            ALLOCATED: devices,
            "hami.io/vgpu-devices-to-allocate": devices,
        }
        patch = {"metadata": {"labels": {"hami.io/vgpu-node": node}, "annotations": annotations}}
        self.api.patch(f"/api/v1/namespaces/{ns}/pods/{name}", patch)
        self._event(meta, "FilteringSucceed", f"Successfully filtered to following nodes: [{node}] for {ns}/{name}")

    def _bind(self, meta: dict, node: str) -> None:
        ns, name = meta["namespace"], meta["name"]
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for _ in range(200):  # wait while another pod's Allocate holds this node's lock, as a queued bind does
            meta_now = self.api.get(f"/api/v1/nodes/{node}")["metadata"]
            if (meta_now.get("annotations") or {}).get(LOCK):
                time.sleep(0.05)
                continue
            lock = {
                "metadata": {
                    "annotations": {LOCK: f"{stamp},{ns},{name}"},
                    "resourceVersion": meta_now["resourceVersion"],
                }
            }
            try:
                self.api.patch(f"/api/v1/nodes/{node}", lock)
                break
            except ApiError as exc:
                if exc.status != 409:
                    raise
        phase = {"metadata": {"annotations": {BIND_PHASE: "allocating", "hami.io/bind-time": str(int(time.time()))}}}
        self.api.patch(f"/api/v1/namespaces/{ns}/pods/{name}", phase)
        self._event(meta, "BindingSucceed", f"Successfully binding node [{node}] to {ns}/{name}")

    def stop(self) -> None:
        self.watch.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        if isinstance(self.api, KeepAliveApi):
            self.api.close()


class BindTracker:
    """When each pod of a namespace was first seen bound (spec.nodeName), through a watch."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.bound: dict[str, float] = {}
        self.nodes: dict[str, str] = {}
        self.watch = Watch(api, f"/api/v1/namespaces/{namespace}/pods", self._on_pod)
        self.watch.start()
        self.watch.synced.wait(30)

    def _on_pod(self, kind: str, pod: dict) -> None:
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        node = pod["spec"].get("nodeName")
        if node and key not in self.bound:
            self.bound[key] = time.time()
            self.nodes[key] = node

    def stop(self) -> None:
        self.watch.stop()


# -- reading allocations from the API alone ---------------------------------------------------
@dataclass
class Device:
    node: str
    uuid: str
    mem: int
    cores: int
    split: int
    used_mem: int = 0
    used_cores: int = 0
    pods: list[str] = field(default_factory=list)
    exclusive_pods: list[str] = field(default_factory=list)


def parse_allocated(value: str) -> list[list[tuple[str, str, int, int]]]:
    """`uuid,type,mem,cores:` per device, `;` per container (HAMi's encoding)."""
    containers = []
    for part in value.split(";"):
        devices = []
        for dev in part.split(":"):
            if dev.strip():
                uuid, typ, mem, cores = dev.split(",")
                devices.append((uuid, typ, int(mem), int(cores)))
        containers.append(devices)
    while containers and not containers[-1]:
        containers.pop()
    return containers


def live_pods(pods: Iterable[dict]) -> list[dict]:
    return [
        p
        for p in pods
        if p["spec"].get("nodeName")
        and not p["metadata"].get("deletionTimestamp")
        and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
    ]


def device_usage(api: KubeApi) -> dict[str, Device]:
    """Every registered device with what the API's pods hold on it."""
    devices: dict[str, Device] = {}
    for node in api.get("/api/v1/nodes")["items"]:
        register = (node["metadata"].get("annotations") or {}).get(REGISTER)
        for d in json.loads(register) if register else []:
            devices[d["id"]] = Device(node["metadata"]["name"], d["id"], d["devmem"], d["devcore"], d["count"])
    for pod in live_pods(list_pods(api)):
        value = (pod["metadata"].get("annotations") or {}).get(ALLOCATED)
        if not value:
            continue
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        for container in parse_allocated(value):
            for uuid, _typ, mem, cores in container:
                d = devices[uuid]
                d.used_mem += mem
                d.used_cores += cores
                d.pods.append(key)
                if cores >= d.cores:
                    d.exclusive_pods.append(key)
    return devices


def overcommitted(devices: dict[str, Device]) -> list[str]:
    """Every device over memory, cores or split count, and every exclusive card shared."""
    bad = []
    for d in devices.values():
        if d.used_mem > d.mem or d.used_cores > d.cores or len(d.pods) > d.split:
            bad.append(
                f"{d.uuid}: mem {d.used_mem}/{d.mem} cores {d.used_cores}/{d.cores} pods {len(d.pods)}/{d.split}"
            )
        if d.exclusive_pods and len(d.pods) > 1:
            bad.append(f"{d.uuid}: exclusive {d.exclusive_pods} shared with {d.pods}")
    return bad


def allocations(api: KubeApi, namespaces: Iterable[str]) -> dict[str, tuple[str, str]]:
    """{ns/name: (node, devices annotation)} of every bound pod: what must stay untouched."""
    out = {}
    for ns in namespaces:
        for pod in live_pods(list_pods(api, ns)):
            annotations = pod["metadata"].get("annotations") or {}
            out[f"{ns}/{pod['metadata']['name']}"] = (pod["spec"]["nodeName"], annotations.get(ALLOCATED, ""))
    return out


METRIC_LINE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return resp.read().decode()


def metric_usage(text: str) -> dict[str, tuple[int, int, int]]:
    """{device uuid: (allocated MiB, allocated cores, shared count)} from HAMi's hami_gpu_* gauges."""
    mem: dict[str, float] = {}
    cores: dict[str, float] = {}
    shared: dict[str, float] = {}
    targets = {
        "hami_gpu_memory_allocated_bytes": mem,
        "hami_gpu_core_allocated_ratio": cores,
        "hami_gpu_shared_count": shared,
    }
    for line in text.splitlines():
        m = METRIC_LINE.match(line)
        if not m or m["name"] not in targets:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m["labels"]))
        targets[m["name"]][labels["device_uuid"]] = float(m["value"])
    return {
        uuid: (int(mem.get(uuid, 0) // 1048576), int(cores.get(uuid, 0)), int(shared.get(uuid, 0)))
        for uuid in set(mem) | set(cores) | set(shared)
    }


def api_usage(devices: dict[str, Device]) -> dict[str, tuple[int, int, int]]:
    return {uuid: (d.used_mem, d.used_cores, len(d.pods)) for uuid, d in devices.items()}


def usage_differences(metrics: dict[str, tuple[int, int, int]], devices: dict[str, Device]) -> list[str]:
    expected = api_usage(devices)
    out = []
    for uuid in sorted(set(expected) | set(metrics)):
        want, got = expected.get(uuid, (0, 0, 0)), metrics.get(uuid, (0, 0, 0))
        if want != got:
            out.append(f"{uuid}: API {want} metrics {got}")
    return out


# -- CPU per component ------------------------------------------------------------------------
def cpu_seconds(cp: ControlPlane) -> dict[str, float]:
    """User + system CPU seconds each running component has used so far (/proc/<pid>/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for name, proc in cp.procs.items():
        if proc.alive():
            try:
                fields = Path(f"/proc/{proc.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
                out[name] = (int(fields[11]) + int(fields[12])) / tick
            except (OSError, IndexError, ValueError):
                pass
    times = os.times()
    out["tests (this process)"] = times.user + times.system
    return out


# -- API calls per user, from the audit log ----------------------------------------------------
def audit_offset(path: Path) -> int:
    """Where the audit log ends now: reading from here skips earlier runs' lines."""
    return path.stat().st_size if path.exists() else 0


def audit_calls(path: Path, since: float, until: float, offset: int = 0) -> dict[str, collections.Counter]:
    """{user: Counter("verb resource[/subresource]")} of the requests received in [since, until]."""
    out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    if not path.exists():
        return out
    with path.open() as fh:
        fh.seek(offset)
        for line in fh:
            event = json.loads(line)
            stamp = datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()
            if since <= stamp <= until:
                ref = event.get("objectRef") or {}
                resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
                out[event["user"]["username"]][f"{event['verb']} {resource or event.get('requestURI', '')}"] += 1
    return out


def audit_counts(path: Path, since: float, until: float, offset: int = 0) -> dict[str, collections.Counter]:
    """{user: Counter(verb)} of the requests received in [since, until] (Unix seconds)."""
    out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for user, calls in audit_calls(path, since, until, offset).items():
        for kind, n in calls.items():
            out[user][kind.split(" ", 1)[0]] += n
    return out


# -- the two schedulers and the switch ---------------------------------------------------------
class SideBySide:
    """HAMi's binary and hami-fast on one control plane; `use()` switches kube-scheduler and the webhook."""

    def __init__(
        self,
        cp: ControlPlane,
        qps: int = 5,
        burst: int = 10,
        node_policy: str = "",
        values: dict[str, Any] | None = None,
        hami_args: list[str] | None = None,
    ) -> None:
        """`values`: our chart's (e.g. a vendor switched on); `hami_args`: extra flags of HAMi's binary."""
        self.cp, self.api = cp, cp.api
        self.qps, self.burst, self.node_policy = qps, burst, node_policy
        self.hami_args = list(hami_args or [])
        self.objs = render_chart(values)
        self.hami_objs = [d for d in yaml.safe_load_all((HAMI_DIR / "hami-chart-objects.yaml").read_text()) if d]
        self.ports = {HAMI: free_port(), FAST: free_port()}
        self.metrics_ports = {HAMI: free_port(), FAST: free_port()}
        self.active = ""
        self.nodes: list[str] = []
        self.fast_args: list[str] = []  # extra `hami-fast serve` flags (opt-in behaviours measured side by side)

    def chart(self, kind: str, suffix: str = "") -> dict:
        (found,) = [o for o in self.objs if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
        return copy.deepcopy(found)

    def hami_chart(self, kind: str, name: str) -> dict:
        (found,) = [o for o in self.hami_objs if o["kind"] == kind and o["metadata"]["name"] == name]
        return copy.deepcopy(found)

    def setup(self) -> SideBySide:
        self.cp.install_chart_objects(self.objs)
        self.cp.install_chart_objects(self.hami_objs, namespace=HAMI_NS)
        self.start(HAMI)
        self.start(FAST)
        self.webhook = self.chart("MutatingWebhookConfiguration")
        for wh in self.webhook["webhooks"]:
            wh["failurePolicy"] = "Fail"  # a dead webhook must fail loudly here
        return self

    # processes
    def start(self, which: str) -> Proc:
        return self._start_hami() if which == HAMI else self._start_fast()

    def restart(self, which: str) -> Proc:
        self.cp.procs[which if which == FAST else "hami-scheduler"].stop()
        return self.start(which)

    def _start_hami(self) -> Proc:
        dep = self.hami_chart("Deployment", "hami-scheduler")
        (ext,) = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "vgpu-scheduler-extender"]
        chart_args = ext["command"][1:] + ext.get("args", [])
        devcfg = self.cp.workdir / "hami-device-config.yaml"
        devcfg.write_text(self.hami_chart("ConfigMap", "hami-scheduler-device")["data"]["device-config.yaml"])
        ours = {
            "--http_bind": f"127.0.0.1:{self.ports[HAMI]}",
            "--cert_file": str(self.cp.pki / "hami-fast.crt"),
            "--key_file": str(self.cp.pki / "hami-fast.key"),
            "--metrics-bind-address": f"127.0.0.1:{self.metrics_ports[HAMI]}",
            "--device-config-file": str(devcfg),
            "--leader-elect": "false",
            "--kube-qps": str(self.qps),
            "--kube-burst": str(self.burst),
            "--debug": "false",
        }
        if self.node_policy:
            ours["--node-scheduler-policy"] = self.node_policy
        kept = [
            a for a in chart_args if a.split("=")[0] not in ours and a not in ("--debug",) and not a.startswith("-v")
        ]
        args = [
            str(HAMI_DIR / "hami-scheduler"),
            *kept,
            *(f"{k}={v}" for k, v in ours.items()),
            *self.hami_args,
            "-v=2",
        ]
        env = {
            **os.environ,
            "KUBECONFIG": str(self.cp.kubeconfig("hami-scheduler", self.cp.tokens[HAMI_USER])),
            "POD_NAME": socket.gethostname(),
            "POD_NAMESPACE": HAMI_NS,
            "HAMI_NODELOCK_EXPIRE": "5m",
        }
        proc = Proc("hami-scheduler", args, self.cp.workdir / "logs" / "hami-scheduler.log", env=env).start()
        self.cp.procs["hami-scheduler"] = proc
        ctx = ssl.create_default_context(cafile=str(self.cp.ca_file))

        def healthy() -> bool:
            if not proc.alive():
                raise RuntimeError(f"hami-scheduler exited:\n{proc.tail()}")
            with urllib.request.urlopen(f"https://127.0.0.1:{self.ports[HAMI]}/healthz", context=ctx, timeout=2) as r:
                return r.status == 200

        wait_for("HAMi /healthz", healthy, timeout=90)
        return proc

    def _start_fast(self) -> Proc:
        dep = self.chart("Deployment", "-scheduler")
        (c,) = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "vgpu-scheduler-extender"]
        replaced = ("--leader-elect", "--kube-qps", "--kube-burst", "--log-level")
        if self.node_policy:
            replaced += ("--node-scheduler-policy",)
        args = [
            a for a in with_local_device_config(c["args"], self.objs, self.cp.workdir) if not a.startswith(replaced)
        ]
        args += ["--leader-elect=false", f"--kube-qps={self.qps}", f"--kube-burst={self.burst}", "--log-level=warning"]
        if self.node_policy:
            args.append(f"--node-scheduler-policy={self.node_policy}")
        args += self.fast_args
        proc = self.cp.start_hami_fast(args, self.ports[FAST], self.metrics_ports[FAST])
        self.cp.wait_hami_fast(self.ports[FAST], "/readyz")
        return proc

    def set_fast_args(self, args: list[str]) -> None:
        """Restart hami-fast with these extra flags (a no-op when they are already in force)."""
        if args != self.fast_args:
            self.fast_args = list(args)
            self.restart(FAST)

    def set_client_limits(self, qps: int, burst: int) -> None:
        """Restart both schedulers with these API client limits (their --kube-qps / --kube-burst)."""
        self.qps, self.burst = qps, burst
        self.restart(HAMI)
        self.restart(FAST)
        if self.nodes:
            try:
                self.wait_nodes_registered(self.nodes, timeout=max(60, min(120, 3 * len(self.nodes) / qps)))
            except TimeoutError:  # HAMi writes each node's handshake through its limiter: report, carry on
                log(f"HAMi has not registered all {len(self.nodes)} nodes at QPS {qps} yet; measuring anyway")

    # the switch: the webhook's URL and kube-scheduler's extender URL, as an operator changes them
    def use(self, which: str) -> None:
        url = f"https://127.0.0.1:{self.ports[which]}"
        for wh in self.webhook["webhooks"]:
            wh["clientConfig"] = {
                "url": f"{url}/webhook",
                "caBundle": base64.b64encode(self.cp.ca_file.read_bytes()).decode(),
            }
        path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
        name = self.webhook["metadata"]["name"]
        try:
            current = self.api.get(f"{path}/{name}")
            self.webhook["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            self.api.request("PUT", f"{path}/{name}", self.webhook)
        except ApiError as exc:
            if exc.status != 404:
                raise
            self.webhook["metadata"].pop("resourceVersion", None)
            self.api.create(path, self.webhook)
        text = self.chart("ConfigMap", "-scheduler")["data"]["config.yaml"].replace("https://127.0.0.1:9443", url)
        cfg = yaml.safe_load(text)
        cfg["leaderElection"] = {"leaderElect": False}
        if "kube-scheduler" in self.cp.procs:
            self.cp.procs["kube-scheduler"].stop()
        self.cp.start_kube_scheduler(yaml.safe_dump(cfg), token=self.cp.tokens[KS_USER], qps=1000, burst=2000)
        self.active = which
        time.sleep(2)  # the API server's webhook registry and kube-scheduler's informers catch up
        log(f"kube-scheduler and the webhook now use {which} ({url})")

    def wait_nodes_registered(self, names: list[str], timeout: float = 120) -> None:
        """HAMi's /filter blocks on nodes it has not registered yet: wait until its metrics list them all."""
        self.nodes = sorted(set(self.nodes) | set(names))

        def registered() -> bool:
            text = scrape(self.metrics_ports[HAMI])
            seen = set(re.findall(r'hami_node_gpu_overview\{[^}]*node="([^"]+)"', text))
            return set(names) <= seen

        wait_for("HAMi registered every node", registered, timeout=timeout, interval=1)

    def metric_usage(self, which: str) -> dict[str, tuple[int, int, int]]:
        return metric_usage(scrape(self.metrics_ports[which]))


def control_plane(workdir: Path, **options: Any) -> ControlPlane:
    users = {
        HAMI_USER: f"system:serviceaccounts,system:serviceaccounts:{HAMI_NS},system:authenticated",
        KS_USER: "system:authenticated",
        KWOK_USER: "system:masters",
        PLUGIN_USER: "system:masters",
        PROTOCOL_USER: "system:masters",
    }
    audited = [HAMI_USER, SA_USER, KS_USER, KWOK_USER, PLUGIN_USER, PROTOCOL_USER, *options.pop("audit_extra", [])]
    return ControlPlane(workdir, extra_users=users, audit_users=audited, **options)


def start_kwok(cp: ControlPlane) -> Proc:
    proc = Proc(
        "kwok",
        [
            str(kwok_binary()),
            f"--kubeconfig={cp.kubeconfig('kwok', cp.tokens.get(KWOK_USER, cp.admin_token))}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--cidr=10.64.0.0/12",
            "--node-ip=10.63.0.1",
        ],
        cp.workdir / "logs" / "kwok.log",
    ).start()
    cp.procs["kwok"] = proc
    return proc

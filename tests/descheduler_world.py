"""The descheduler suites' world on the test Kubernetes API server: a registered two-node cluster,
its pods and placements, pinning webhooks (closed after each test by tests/descheduler/conftest.py),
AdmissionReviews and their patches, the auto mode's records and metrics."""

from __future__ import annotations

import base64
import json
import re
import socket
import threading

import orjson
from hami_fast.descheduler import kube as k
from hami_fast.descheduler.controller import Timeouts
from hami_fast.descheduler.metrics import DeschedulerMetrics
from hami_fast.descheduler.webhook import Pinner
from hami_fast.kube.client import KubeClient
from k8s_objects import registered_node, replica_pod
from kubeapi import patch as patchlib

NS = "serving"
EVICTIONS = re.compile(r"/pods/[^/]+/eviction$")


def node(name: str, gpus: int = 2, unhealthy: tuple[int, ...] = ()) -> dict:
    return registered_node(name, gpus, unhealthy=unhealthy)


def pod(
    name: str, node_name: str | None, gpu: int = 0, mem: int = 4000, owned: bool = True, app: str = "infer"
) -> dict:
    """A pod of ReplicaSet `rs-infer` labelled `app`, running on `node_name` or pending (None)."""
    return replica_pod(
        name, node_name, gpu, mem, namespace=NS, labels={"app": app}, owner="rs-infer" if owned else None
    )


def placement(
    name: str, node_name: str, gpus: list[str], evict: str | None = None, req_id: str | None = None, app: str = "infer"
) -> dict:
    spec: dict = {
        "reqID": req_id or f"req-{name}",
        "podSelector": {"matchLabels": {"app": app}},
        "nodeName": node_name,
        "gpuDevices": gpus,
    }
    if evict:
        spec["evictPod"] = evict
    return {
        "apiVersion": f"{k.GROUP}/{k.VERSION}",
        "kind": "HamiPodPlacement",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def create_placement(kubeapi, body: dict) -> dict:
    return kubeapi.custom.create_namespaced_custom_object(k.GROUP, k.VERSION, NS, k.PLURAL, body)


def status_of(kubeapi, name: str) -> dict:
    return kubeapi.get("hamipodplacements.scheduling.hami.placement.com", name, NS).get("status") or {}


_PINNERS: list[Pinner] = []


def make_pinner(client: KubeClient, **kwargs) -> Pinner:
    """A pinning webhook with its own placement informer (list, then watch), closed after the test."""
    pinner = Pinner(client, **kwargs)
    _PINNERS.append(pinner)
    return pinner


def close_pinners() -> None:
    for pinner in _PINNERS:
        pinner.close()
    _PINNERS.clear()


def sees(pinner: Pinner, name: str, phase: str, timeout: float = 5.0) -> None:
    """Wait until the pinner's cache has the placement in `phase` (the watch delivers writes)."""
    informer = pinner.informer()
    assert informer is not None and informer.wait_synced(timeout)
    key = f"{NS}/{name}"
    ok = informer.store.wait_until(lambda st: ((st.get(key) or {}).get("status") or {}).get("phase") == phase, timeout)
    assert ok, informer.store.get(key)


def fast() -> Timeouts:
    return Timeouts(eviction=30, replacement=30, bind=30, backoff_min=0.05, backoff_max=0.1)


def admission(pod_obj: dict, uid: str = "r1", dry_run: bool = False) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "operation": "CREATE",
                "namespace": NS,
                "object": pod_obj,
                "dryRun": dry_run,
            },
        }
    )


def patched(pod_obj: dict, answer: bytes) -> dict | None:
    response = orjson.loads(answer)["response"]
    assert response["allowed"] is True
    if "patch" not in response:
        return None
    return patchlib.json_patch(json.loads(json.dumps(pod_obj)), json.loads(base64.b64decode(response["patch"])))


def replacement(generate: str = "infer-") -> dict:
    p = pod("", None)
    p["metadata"].pop("name")
    p["metadata"].pop("uid")
    p["metadata"]["generateName"] = generate
    return p


def bind(kubeapi, name: str, node_name: str, uuid: str, mem: int = 4000) -> None:
    kubeapi.patch(
        "pods",
        name,
        {
            "spec": {"nodeName": node_name},
            "status": {"phase": "Running"},
            "metadata": {
                "annotations": {
                    "hami.io/vgpu-node": node_name,
                    "hami.io/vgpu-devices-allocated": f"{uuid},NVIDIA,{mem},20:;",
                    "hami.io/bind-phase": "success",
                }
            },
        },
        NS,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeReplicaSetAndScheduler(threading.Thread):
    """Stands in for the ReplicaSet controller (recreates an evicted pod through the pinning
    webhook) and for hami-scheduler (binds a pinned pod on its whitelisted GPU)."""

    def __init__(self, kubeapi, client, stop: threading.Event, mem_by_app: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.mem_by_app = mem_by_app
        self.kubeapi, self.pinner, self.stop_event = kubeapi, Pinner(client, stop=stop), stop
        self.made = 0

    def run(self) -> None:
        while not self.stop_event.is_set():
            for p in self.kubeapi.list("hamipodplacements.scheduling.hami.placement.com", NS):
                st = p.get("status") or {}
                if st.get("phase") == "DeletingOldPod" and not st.get("claimedBy"):
                    labels = p["spec"]["podSelector"]["matchLabels"]
                    new = replacement()
                    new["metadata"]["labels"] = dict(labels)
                    new["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = str(
                        self.mem_by_app[labels["app"]]
                    )
                    out = patched(new, self.pinner.admit(admission(new, uid=f"x{self.made}")))
                    if out is not None:
                        self.made += 1
                        out["metadata"]["name"] = f"repl-{self.made}"
                        self.kubeapi.create(out)
            for pd in self.kubeapi.list("pods", NS):
                ann = pd["metadata"].get("annotations") or {}
                if ann.get("nvidia.com/use-gpuuuid") and not pd["spec"].get("nodeName"):
                    target = ann[k.STAMP_TARGET].split("/")[0]
                    mem = int(pd["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"])
                    bind(self.kubeapi, pd["metadata"]["name"], target, ann["nvidia.com/use-gpuuuid"].split(",")[0], mem)
            self.stop_event.wait(0.05)


def pending(name: str = "big", mem: int = 14000, unschedulable: bool = True) -> dict:
    p = pod(name, None, mem=mem)
    if unschedulable:
        p["status"]["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/2 nodes are available: 2 1/2 CardInsufficientMemory, 1/2 CardTimeSlicingExhausted.",
            }
        ]
    return p


def recorded(kubeapi, name: str = "hami-gpu-descheduler-auto-moves") -> list[dict]:
    """The hour's moves as the ConfigMap holds them."""
    configmap = kubeapi.get("configmaps", name, "kube-system")
    return orjson.loads(configmap["data"]["moves"]) if configmap else []


def counted(metrics: DeschedulerMetrics, sample: str, label: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        s.labels[label]: s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
        if s.name == sample and s.value
    }

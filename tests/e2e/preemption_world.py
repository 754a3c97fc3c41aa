"""The preemption scenario, side by side with HAMi's binary: a pool of GPUs full of the low-priority
pods of a Deployment (two per GPU) under a PodDisruptionBudget that allows exactly two disruptions;
a high-priority pod asking for a whole GPU arrives. What each scheduler does, read from API objects
alone: which pods went, where the preemptor was bound, what the Deployment's replacements got,
the budget's health over the run, and the pending pod's message.

Needs kube-controller-manager (Deployment, ReplicaSet and disruption controllers), the device-plugin
stand-in and the kubelet stand-in (`kubelet.py`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from controlplane import KubeApi, wait_for
from sidebyside import ALLOCATED, BIND_PHASE, GPU_MEM, Watch, gpu_pod, parse_allocated

LOW, HIGH = "e2e-sbs-low", "e2e-sbs-high"  # PriorityClasses
APP = "gpu-batch"
BUDGET = "gpu-batch"
HALF = GPU_MEM // 2


def priority_class(api: KubeApi, name: str, value: int, preemption_policy: str | None = None) -> None:
    body = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **({"preemptionPolicy": preemption_policy} if preemption_policy else {}),
    }
    api.create("/apis/scheduling.k8s.io/v1/priorityclasses", body, exist_ok=True)


def priority_classes(api: KubeApi) -> None:
    for name, value in ((LOW, 10), (HIGH, 1000)):
        priority_class(api, name, value)


def workload(api: KubeApi, namespace: str, pool: str, replicas: int) -> None:
    """The Deployment (half a GPU per pod, 2 s grace) and its budget (all but two must stay healthy)."""
    template = gpu_pod("x", namespace, {"nvidia.com/gpu": 1, "nvidia.com/gpumem": HALF}, {"pool": pool})
    template["spec"].update(priorityClassName=LOW, terminationGracePeriodSeconds=2)
    spec = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": APP}},
        "template": {"metadata": {"labels": {"app": APP}}, "spec": template["spec"]},
    }
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": APP}, "spec": spec}
    api.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment)
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": BUDGET},
        "spec": {"minAvailable": replicas - 2, "selector": {"matchLabels": {"app": APP}}},
    }
    api.create(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", pdb)


def scale_to_zero(api: KubeApi, namespace: str) -> None:
    api.patch(f"/apis/apps/v1/namespaces/{namespace}/deployments/{APP}", {"spec": {"replicas": 0}})


def preemptor(name: str, namespace: str, pool: str) -> dict[str, Any]:
    pod = gpu_pod(name, namespace, {"nvidia.com/gpu": 1, "nvidia.com/gpumem": GPU_MEM}, {"pool": pool})
    pod["spec"]["priorityClassName"] = HIGH
    return pod


def gpus_of(pod: dict[str, Any]) -> set[str]:
    value = (pod["metadata"].get("annotations") or {}).get(ALLOCATED) or ""
    return {uuid for container in parse_allocated(value) for uuid, *_ in container}


@dataclass
class Replica:
    uid: str
    name: str
    node: str | None
    gpus: set[str]
    ready: bool
    terminating: bool


def replicas(api: KubeApi, namespace: str) -> dict[str, Replica]:
    """The Deployment's pods by UID."""
    out = {}
    for pod in api.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3D{APP}")["items"]:
        meta, conditions = pod["metadata"], (pod.get("status") or {}).get("conditions") or []
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        out[meta["uid"]] = Replica(
            meta["uid"],
            meta["name"],
            pod["spec"].get("nodeName"),
            gpus_of(pod),
            ready,
            bool(meta.get("deletionTimestamp")),
        )
    return out


def budget_status(api: KubeApi, namespace: str) -> dict[str, Any]:
    pdb = api.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{BUDGET}")
    status = pdb.get("status") or {}
    return status if status.get("observedGeneration") == pdb["metadata"].get("generation") else {}


def settled(api: KubeApi, namespace: str, count: int) -> bool:
    """Every replica bound, allocated and Ready, none terminating, and the budget allowing two."""
    pods = list(replicas(api, namespace).values())
    full = len(pods) == count and all(p.ready and p.gpus and not p.terminating for p in pods)
    return full and budget_status(api, namespace).get("disruptionsAllowed") == 2


@dataclass
class Timeline:
    """When each pod of a namespace was first seen bound, terminating and gone (by name and by UID),
    and, once `armed` (the workload settled), the lowest healthy margin (currentHealthy -
    desiredHealthy) its budget reported."""

    api: KubeApi
    namespace: str
    bound: dict[str, float] = field(default_factory=dict)
    terminating: dict[str, float] = field(default_factory=dict)
    deleted: dict[str, float] = field(default_factory=dict)
    budget_margin: int | None = None
    armed: bool = False

    def start(self) -> Timeline:
        ns = self.namespace
        self.pods = Watch(self.api, f"/api/v1/namespaces/{ns}/pods", self._on_pod)
        self.budgets = Watch(self.api, f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", self._on_budget)
        for w in (self.pods, self.budgets):
            w.start()
            w.synced.wait(30)
        return self

    def stop(self) -> None:
        self.pods.stop()
        self.budgets.stop()

    def _on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        meta, now = pod["metadata"], time.time()
        if pod["spec"].get("nodeName"):
            self.bound.setdefault(meta["name"], now)
        if meta.get("deletionTimestamp"):
            self.terminating.setdefault(meta["uid"], now)
        if kind == "DELETED":
            self.deleted.setdefault(meta["uid"], now)

    def _on_budget(self, kind: str, pdb: dict[str, Any]) -> None:
        status = pdb.get("status") or {}
        fresh = status.get("observedGeneration") == pdb["metadata"].get("generation")
        if kind == "DELETED" or not fresh or not self.armed:
            return
        margin = int(status.get("currentHealthy", 0)) - int(status.get("desiredHealthy", 0))
        self.budget_margin = margin if self.budget_margin is None else min(self.budget_margin, margin)


@dataclass
class Round:
    """One high-priority pod's arrival on the full pool, read back from the API."""

    victims: list[Replica]  # the replicas that went
    victim_gpus: set[str]
    preemptor_gpus: set[str]
    replacements: list[Replica]  # replicas created meanwhile
    created: float
    bound: float | None
    first_eviction: float | None
    victims_gone: float | None

    def summary(self) -> dict[str, Any]:
        def since(t: float | None) -> float | None:
            return None if t is None else round(t - self.created, 2)

        return {
            "victims": len(self.victims),
            "bound_s": since(self.bound),
            "first_eviction_s": since(self.first_eviction),
            "victims_gone_s": since(self.victims_gone),
        }


def read_round(
    before: dict[str, Replica], after: dict[str, Replica], pod: dict[str, Any], timeline: Timeline, created: float
) -> Round:
    victims = [r for uid, r in before.items() if uid not in after or after[uid].terminating]
    gone = [timeline.deleted[v.uid] for v in victims if v.uid in timeline.deleted]
    starts = [timeline.terminating[v.uid] for v in victims if v.uid in timeline.terminating]
    return Round(
        victims=victims,
        victim_gpus={g for v in victims for g in v.gpus},
        preemptor_gpus=gpus_of(pod),
        replacements=[r for uid, r in after.items() if uid not in before],
        created=created,
        bound=timeline.bound.get(pod["metadata"]["name"]),
        first_eviction=min(starts) if starts else None,
        victims_gone=max(gone) if victims and len(gone) == len(victims) else None,
    )


def allocated(api: KubeApi, namespace: str, name: str) -> dict[str, Any] | None:
    pod = api.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    return pod if (pod["metadata"].get("annotations") or {}).get(BIND_PHASE) == "success" else None


def scheduling_message(api: KubeApi, namespace: str, name: str) -> str | None:
    """kube-scheduler's verdict once its preemption step has run: the PodScheduled condition's message
    when the FailedScheduling event carries a `preemption:` part."""
    events = api.get(f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.name%3D{name}")["items"]
    if not any(e["reason"] == "FailedScheduling" and "preemption:" in e["message"] for e in events):
        return None
    pod = api.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return f"{c.get('reason')}: {c.get('message')}"
    return None


def wait_settled(api: KubeApi, namespace: str, count: int, timeout: float = 120) -> None:
    wait_for(
        f"{namespace}: {count} replicas Ready and the budget at 2", lambda: settled(api, namespace, count), timeout, 0.5
    )

"""End-to-end: vGPU-aware preemption on the real control plane. A GPU full of a low-priority pod; a
high-priority pod that needs the whole GPU gets it: hami-fast evicts the low-priority pod through
the Eviction API, holds the GPU, nominates the node, and the pod binds there. No preemption for a
pod of equal or lower priority, for `preemptionPolicy: Never`, or when a PodDisruptionBudget (its
status computed by kube-controller-manager's disruption controller) forbids it. A restart of
hami-fast while the victim terminates keeps the hold and evicts nothing twice. Opt-in, see
conftest.py.

The pods ask for `nvidia.com/use-gputype: H100`: only this module's node has an H100, so the other
modules' nodes and pods play no part.
"""

from __future__ import annotations

from typing import Any

import pytest
from controlplane import ApiError, wait_for
from hami_fast import annotations as keys
from kubelet import ready_status
from preemption_world import priority_class
from test_e2e_control_plane import (
    NS,
    _alive,
    allocations,
    device_plugin_allocate,
    events_for,
    get_pod,
    gpu_pod,
    make_node,
    pods_path,
    wait_bound,
)

GPU_MEM = 16384
H100 = {"nvidia.com/use-gputype": "H100"}
# Each refusal on its own 1-GPU node: (holder's PriorityClass, waiting pod's PriorityClass).
REFUSALS = {"lower": ("e2e-high", "e2e-low"), "never": ("e2e-low", "e2e-high-never"), "pdb": ("e2e-low", "e2e-high")}
GUARDED = {"app": "e2e-guarded"}


def pod(name: str, priority_class: str, node: str = "pre-1", labels: dict[str, str] | None = None) -> dict[str, Any]:
    out = gpu_pod(name, node=node, gpu=1, mem=GPU_MEM, labels=labels)
    out["metadata"]["annotations"] = dict(H100)
    out["spec"]["priorityClassName"] = priority_class
    return out


@pytest.fixture(scope="module")
def node(cluster):
    api = cluster.api
    api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, exist_ok=True)
    for name, value, policy in (("e2e-low", 10, None), ("e2e-high", 1000, None), ("e2e-high-never", 1000, "Never")):
        priority_class(api, name, value, policy)
    for name in ("pre-1", *(f"pre-{case}" for case in REFUSALS), "pre-control", "pre-restart"):
        make_node(api, name, gpus=1, memory=GPU_MEM, gpu_type="NVIDIA-H100-SXM5-16GB")
    return "pre-1"


def gone(api, name: str) -> bool:
    try:
        found = get_pod(api, name)
    except ApiError as exc:
        return exc.status == 404
    return bool(found["metadata"].get("deletionTimestamp"))


def reasons_of(api, name: str) -> set[str]:
    return {e["reason"] for e in events_for(api, name)}


def test_a_high_priority_pod_evicts_the_low_priority_holder_and_binds_on_its_gpu(cluster, node):
    api = cluster.api
    api.create(pods_path(), pod("holder-low", "e2e-low"))
    device_plugin_allocate(api, wait_bound(cluster, "holder-low"))
    api.create(pods_path(), pod("same-low", "e2e-low"))
    api.create(pods_path(), pod("urgent", "e2e-high"))
    bound = wait_bound(cluster, "urgent", timeout=120)
    assert bound["spec"]["nodeName"] == node
    assert gone(api, "holder-low")
    # Events are posted in the background, after the eviction.
    wait_for("a Preempted event on the victim", lambda: "Preempted" in reasons_of(api, "holder-low"), timeout=30)
    wait_for("a Preempting event on the preemptor", lambda: "Preempting" in reasons_of(api, "urgent"), timeout=30)
    # The pod of equal priority evicted no one and is still pending.
    _alive(cluster)
    same = get_pod(api, "same-low")
    assert not same["spec"].get("nodeName") and not same["metadata"].get("deletionTimestamp")
    for name in ("urgent", "same-low"):
        api.delete(pods_path(name))
    wait_for("the module's pods gone", lambda: all(gone(api, n) for n in ("urgent", "same-low")), timeout=30)


def failed_scheduling(api, name: str) -> str | None:
    return next((e["message"] for e in events_for(api, name) if e["reason"] == "FailedScheduling"), None)


def guard_with_a_budget(cluster, holder: str) -> None:
    """A PodDisruptionBudget over the Ready holder that keeps it (minAvailable 1): the disruption
    controller computes disruptionsAllowed 0."""
    api = cluster.api
    api.patch(pods_path(holder) + "/status", ready_status(), kind="strategic")
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "e2e-guarded", "namespace": NS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": GUARDED}},
    }
    api.create(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets", pdb)

    def computed():
        found = api.get(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/e2e-guarded")
        status = found.get("status") or {}
        fresh = status.get("observedGeneration") == found["metadata"]["generation"]
        return fresh and status.get("currentHealthy") == 1 and status.get("disruptionsAllowed") == 0

    wait_for("the disruption controller's status for the budget", computed, timeout=60)


@pytest.fixture(scope="module")
def refusals(cluster, node) -> dict[str, dict[str, Any]]:
    """Every refusal set up at once, then one pod that must preempt (on its own node) created after
    them all: once its victim is evicted, hami-fast's preemption has looked at every earlier waiting
    pod (it looks at them all, in queue order, in each pass). What each waiting pod and holder then is."""
    api = cluster.api
    cluster.ensure_controllers()
    for case, (holder_class, _) in REFUSALS.items():
        labels = GUARDED if case == "pdb" else None
        api.create(pods_path(), pod(f"{case}-holder", holder_class, f"pre-{case}", labels))
        device_plugin_allocate(api, wait_bound(cluster, f"{case}-holder"))
    guard_with_a_budget(cluster, "pdb-holder")
    for case, (_, waiting_class) in REFUSALS.items():
        api.create(pods_path(), pod(f"{case}-waiting", waiting_class, f"pre-{case}"))
    messages = {
        case: wait_for(f"{case}: rejected", lambda c=case: failed_scheduling(api, f"{c}-waiting"), timeout=60)
        for case in REFUSALS
    }
    wait_for("the budget's refusal", lambda: "PreemptionBlocked" in reasons_of(api, "pdb-waiting"), timeout=60)
    api.create(pods_path(), pod("control-holder", "e2e-low", "pre-control"))
    device_plugin_allocate(api, wait_bound(cluster, "control-holder"))
    api.create(pods_path(), pod("control-urgent", "e2e-high", "pre-control"))
    wait_bound(cluster, "control-urgent", timeout=120)
    assert gone(api, "control-holder"), "the control pod preempted"
    out = {}
    for case in REFUSALS:
        waiting = get_pod(api, f"{case}-waiting")
        blocked = [e["message"] for e in events_for(api, f"{case}-waiting") if e["reason"] == "PreemptionBlocked"]
        out[case] = {
            "holder_gone": gone(api, f"{case}-holder"),
            "waiting": waiting,
            "reasons": reasons_of(api, f"{case}-waiting"),
            "scheduler_message": messages[case],
            "blocked": blocked,
        }
        print(f"[e2e] no preemption ({case}): FailedScheduling {messages[case]!r}; PreemptionBlocked {blocked}")
    yield out
    for name in [f"{c}-{r}" for c in REFUSALS for r in ("holder", "waiting")] + ["control-urgent"]:
        api.delete(pods_path(name))
    api.delete(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/e2e-guarded")


@pytest.mark.parametrize("case", list(REFUSALS))
def test_no_preemption_for_a_lower_priority_for_policy_never_or_when_a_budget_forbids_it(refusals, case) -> None:
    seen = refusals[case]
    assert not seen["holder_gone"], f"{case}: the holder was evicted"
    waiting = seen["waiting"]
    assert not waiting["spec"].get("nodeName") and not (waiting.get("status") or {}).get("nominatedNodeName")
    assert keys.RESERVATION not in (waiting["metadata"].get("annotations") or {})
    assert "Preempting" not in seen["reasons"]
    if case == "pdb":
        want = "a PodDisruptionBudget forbids evicting e2e/pdb-holder (priority 10)"
        assert seen["blocked"] and all(want in m for m in seen["blocked"]), seen["blocked"]
    else:
        assert not seen["blocked"], "nothing to block: no victim was chosen"


def event_count(api, name: str, reason: str) -> int:
    items = api.get(f"/api/v1/namespaces/{NS}/events?fieldSelector=involvedObject.name%3D{name}")["items"]
    return sum(e.get("count") or 1 for e in items if e["reason"] == reason)


def test_a_restart_while_the_victim_terminates_keeps_the_hold_and_evicts_nothing_twice(cluster, node) -> None:
    """The victim is held by a finalizer (it terminates until the test lets it go); hami-fast restarts
    meanwhile. The hold is read back from the preemptor, the victim is not evicted again, a
    low-priority pod that arrives meanwhile never gets the GPU, and the preemptor binds once the
    victim goes."""
    api = cluster.api
    victim = pod("restart-victim", "e2e-low", "pre-restart")
    victim["metadata"]["finalizers"] = ["e2e.example/keep"]
    api.create(pods_path(), victim)
    device_plugin_allocate(api, wait_bound(cluster, "restart-victim"))
    api.create(pods_path(), pod("restart-urgent", "e2e-high", "pre-restart"))
    wait_for("the victim evicted", lambda: gone(api, "restart-victim"), timeout=60)
    held = wait_for(
        "the hold on the preemptor",
        lambda: (get_pod(api, "restart-urgent")["metadata"].get("annotations") or {}).get(keys.RESERVATION),
        timeout=30,
    )
    cluster.restart_hami_fast()
    api.create(pods_path(), pod("restart-thief", "e2e-low", "pre-restart"))
    wait_for("the late pod rejected", lambda: failed_scheduling(api, "restart-thief"), timeout=60)
    assert get_pod(api, "restart-urgent")["metadata"]["annotations"][keys.RESERVATION] == held
    api.patch(pods_path("restart-victim"), {"metadata": {"finalizers": None}})
    bound = wait_bound(cluster, "restart-urgent", timeout=120)
    assert allocations(bound) == [("GPU-pre-restart-0", GPU_MEM, 0)]
    thief = get_pod(api, "restart-thief")
    assert not thief["spec"].get("nodeName") and not thief["metadata"].get("deletionTimestamp")
    wait_for("the victim's Preempted event", lambda: event_count(api, "restart-victim", "Preempted"), timeout=30)
    assert event_count(api, "restart-victim", "Preempted") == 1, "evicted twice"
    assert event_count(api, "restart-urgent", "Preempting") == 1
    for name in ("restart-urgent", "restart-thief"):
        api.delete(pods_path(name))

"""vGPU-aware preemption, served against the test API server: a pending vGPU pod of higher priority
that Filter rejected gets its lower-priority victims evicted (PodDisruptionBudgets honoured), the
freed GPUs held for it and its nominatedNodeName set, with Events on both sides; never for equal or
lower priority nor for `preemptionPolicy: Never`; a victim that does not go leaves the hold to
expire, and a restart evicts nothing twice."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
from hami_fast import annotations as keys
from helm_chart import container, needs_helm, render
from k8s_objects import filter_args, gpu_node, gpu_pod, holding_pod
from kubeapi.fixtures import wait_for
from serving import Service

MEM = 16384  # every test GPU's memory


def running(name: str, priority: int = 0, mem: int = MEM, gpu: int = 0, **extra: Any) -> dict[str, Any]:
    """A running pod of `priority` holding `mem` of GPU `gpu` of node-0 (HAMi's annotations, bound)."""
    pod = holding_pod(name, gpu=gpu, mem=mem)
    pod["metadata"].update(extra)
    pod["spec"].update(priority=priority, terminationGracePeriodSeconds=0)
    return pod


def pending(name: str, priority: int, mem: int = MEM, policy: str | None = None) -> dict[str, Any]:
    pod = gpu_pod(name, gpu=1, mem=mem)
    pod["spec"]["priority"] = priority
    if policy:
        pod["spec"]["preemptionPolicy"] = policy
    return pod


def started(svc: Service) -> None:
    wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")


def rejected(svc: Service, kubeapi, pod: dict[str, Any]) -> dict[str, Any]:
    """Create the pending pod and have Filter reject it, as kube-scheduler would ask."""
    created = kubeapi.get("pods", pod["metadata"]["name"], "default") or kubeapi.create(pod)
    answer = svc.post("/filter", filter_args(created, ["node-0"]))
    assert answer["NodeNames"] in (None, []) and answer["FailedNodes"], answer
    return created


def passes(svc: Service, n: int = 3) -> None:
    """Let the preemption thread look `n` more times."""
    preemptor = svc.runtime.preemptor
    for _ in range(n):
        before = preemptor.passes
        preemptor.wake()
        wait_for(lambda b=before: preemptor.passes > b, 5, "a preemption pass")


def evictions(kubeapi, name: str, dry_run: bool = False) -> list[Any]:
    posts = kubeapi.requests("POST", f"/api/v1/namespaces/default/pods/{name}/eviction")
    return [p for p in posts if bool((p.json.get("deleteOptions") or {}).get("dryRun")) == dry_run]


def events(kubeapi, reason: str) -> list[dict[str, Any]]:
    return [e for e in kubeapi.events("default") if e["reason"] == reason]


def holds(svc: Service) -> list[dict[str, Any]]:
    return orjson.loads(svc.cluster.holds(int(time.time())))


def sample(svc: Service, name: str, **labels: str) -> float | None:
    return svc.runtime.metrics.registry.get_sample_value(name, labels)


def test_the_victim_is_evicted_its_gpu_held_for_the_preemptor_and_the_node_nominated(kubeapi) -> None:
    kubeapi.create(gpu_node("node-0", gpus=2, memory=MEM))
    kubeapi.create(running("low", priority=0, gpu=0))
    kubeapi.create(running("mid", priority=50, gpu=1))
    with Service(kubeconfig=kubeapi.kubeconfig) as svc:
        started(svc)
        wait_for(lambda: svc.cluster.pod_count() == 2, 5, "the running pods in the engine")
        urgent = rejected(svc, kubeapi, pending("urgent", 100))
        svc.runtime.preemptor.wake()
        wait_for(lambda: kubeapi.get("pods", "low", "default") is None, 5, "the victim evicted")
        [eviction] = evictions(kubeapi, "low")
        assert eviction.status == 201 and eviction.json["deleteOptions"]["preconditions"]["uid"] == "uid-default-low"
        assert "gracePeriodSeconds" not in eviction.json["deleteOptions"], "the victim's own grace period"
        assert len(evictions(kubeapi, "low", dry_run=True)) == 1, "the PDB checked first"
        assert kubeapi.get("pods", "mid", "default") is not None and not evictions(kubeapi, "mid")
        stored = kubeapi.get("pods", "urgent", "default")
        assert stored["metadata"]["annotations"][keys.RESERVATION] == "node-0/GPU-node-0-0"
        assert stored["status"]["nominatedNodeName"] == "node-0"
        [preempted] = wait_for(lambda: events(kubeapi, "Preempted"), 5, "the victim's Event")
        assert preempted["object"] == "Pod/default/low" and "default/urgent (priority 100)" in preempted["message"]
        [preempting] = wait_for(lambda: events(kubeapi, "Preempting"), 5, "the preemptor's Event")
        assert preempting["object"] == "Pod/default/urgent" and "default/low (priority 0)" in preempting["message"]
        wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the victim gone from the engine")
        # Nothing else takes the freed GPU; the preemptor does.
        thief = kubeapi.create(pending("thief", 0, mem=1000))
        answer = svc.post("/filter", filter_args(thief, ["node-0"]))
        assert answer["FailedNodes"], answer
        answer = svc.post("/filter", filter_args(urgent, ["node-0"]))
        assert answer["NodeNames"] == ["node-0"], answer
        assert sample(svc, "hami_fast_preemptions_total", result="done") == 1
        assert sample(svc, "hami_fast_preemption_victims_total") == 1


@pytest.mark.parametrize(
    ("holder_priority", "pod_priority", "policy"),
    [(100, 100, None), (100, 50, None), (0, 1000, "Never")],
    ids=["equal", "lower", "preemptionPolicy-Never"],
)
def test_no_preemption_for_equal_or_lower_priority_or_policy_never(
    one_gpu, holder_priority: int, pod_priority: int, policy: str | None
) -> None:
    one_gpu.create(running("holder", priority=holder_priority))
    with Service(kubeconfig=one_gpu.kubeconfig) as svc:
        started(svc)
        wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the holder in the engine")
        rejected(svc, one_gpu, pending("waiting", pod_priority, policy=policy))
        passes(svc)
        assert not one_gpu.requests("POST", "*/eviction")
        assert one_gpu.get("pods", "holder", "default") is not None
        assert holds(svc) == [] and not events(one_gpu, "Preempting")


def guarded_by_a_budget(kubeapi) -> None:
    """node-0's GPU held by `guarded`, under a PodDisruptionBudget that allows no disruption."""
    kubeapi.create(running("guarded"))
    kubeapi.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "keep", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "t"}}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1},
        }
    )


def preempting_urgent(svc: Service, kubeapi) -> None:
    """`urgent` (priority 100) rejected by Filter, and the preemption thread woken for it."""
    started(svc)
    wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the guarded pod in the engine")
    rejected(svc, kubeapi, pending("urgent", 100))
    svc.runtime.preemptor.wake()


def test_a_pdb_that_forbids_the_eviction_stops_the_preemption(one_gpu) -> None:
    guarded_by_a_budget(one_gpu)
    with Service(kubeconfig=one_gpu.kubeconfig) as svc:
        preempting_urgent(svc, one_gpu)
        [blocked] = wait_for(lambda: events(one_gpu, "PreemptionBlocked"), 5, "the blocked preemption reported")
        assert blocked["object"] == "Pod/default/urgent" and "PodDisruptionBudget" in blocked["message"]
        [dry_run] = evictions(one_gpu, "guarded", dry_run=True)
        assert dry_run.status == 429
        passes(svc)
        assert not evictions(one_gpu, "guarded") and len(evictions(one_gpu, "guarded", dry_run=True)) == 1
        stored = one_gpu.get("pods", "urgent", "default")
        assert keys.RESERVATION not in (stored["metadata"].get("annotations") or {})
        assert holds(svc) == [], "the engine's hold dropped"
        assert sample(svc, "hami_fast_preemptions_total", result="blocked") == 1


def test_a_node_change_that_frees_nothing_does_not_ask_the_refusing_budget_again(one_gpu) -> None:
    guarded_by_a_budget(one_gpu)
    with Service(kubeconfig=one_gpu.kubeconfig) as svc:
        preempting_urgent(svc, one_gpu)
        wait_for(lambda: events(one_gpu, "PreemptionBlocked"), 5, "the blocked preemption reported")
        # What the handshake and the device plugin do to every node every few seconds.
        (nodes,) = [r for r in svc.runtime.reflectors if r.resource.kind == "Node"]
        touched = one_gpu.patch("nodes", "node-0", {"metadata": {"labels": {"touched": "1"}}})
        version = touched["metadata"]["resourceVersion"]
        wait_for(lambda: int(nodes.stats.resource_version or 0) >= int(version), 5, "the node change seen")
        passes(svc)
        assert len(evictions(one_gpu, "guarded", dry_run=True)) == 1, "asked once, not at every node change"
        assert holds(svc) == [] and len(events(one_gpu, "PreemptionBlocked")) == 1


def ready(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as its kubelet reports it once its containers are ready: a budget counts it healthy."""
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return pod


def budget(allowed: int) -> dict[str, Any]:
    """A PodDisruptionBudget over every test pod (`app: t`), its status as the disruption controller
    leaves it."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep", "namespace": "default"},
        "spec": {"maxUnavailable": allowed, "selector": {"matchLabels": {"app": "t"}}},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 2 - allowed},
    }


def test_two_victims_under_a_budget_that_allows_one_disruption_are_not_evicted(one_gpu) -> None:
    """Each victim's dry run passes on its own; together they would break the budget: nothing is
    evicted (not one pod for nothing)."""
    for name in ("half-a", "half-b"):
        one_gpu.create(ready(running(name, mem=MEM // 2)))
    one_gpu.create(budget(1))
    with Service(kubeconfig=one_gpu.kubeconfig) as svc:
        started(svc)
        wait_for(lambda: svc.cluster.pod_count() == 2, 5, "the victims in the engine")
        rejected(svc, one_gpu, pending("urgent", 100))
        svc.runtime.preemptor.wake()
        [blocked] = wait_for(lambda: events(one_gpu, "PreemptionBlocked"), 5, "the blocked preemption reported")
        assert "default/keep allows 1 disruption(s) and 2 of the victims" in blocked["message"]
        assert [len(evictions(one_gpu, n, dry_run=True)) for n in ("half-a", "half-b")] == [1, 1]
        assert not evictions(one_gpu, "half-a") and not evictions(one_gpu, "half-b")
        assert holds(svc) == [] and sample(svc, "hami_fast_preemptions_total", result="blocked") == 1


def test_a_budget_spent_between_the_dry_run_and_the_eviction_leaves_the_hold_to_expire(one_gpu) -> None:
    """The dry run passes; before the eviction another disruption spends the budget (here: the test
    sets it to 0 while the nomination is slowed down). The eviction is refused, the GPU stays the
    victim's and is granted to no one, the hold expires and the pod is looked at again."""
    one_gpu.create(ready(running("guarded")))
    one_gpu.create(budget(1))
    one_gpu.delay("PATCH", "/api/v1/namespaces/default/pods/urgent/status", 2.0, times=1)
    with Service(kubeconfig=one_gpu.kubeconfig) as svc:
        started(svc)
        svc.runtime.preemptor.hold_margin = 1.0  # the victim's grace is 0: a hold of about a second
        wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the victim in the engine")
        urgent = rejected(svc, one_gpu, pending("urgent", 100))
        svc.runtime.preemptor.wake()
        wait_for(lambda: evictions(one_gpu, "guarded", dry_run=True), 5, "the dry run")
        one_gpu.patch("poddisruptionbudgets", "keep", {"status": {"disruptionsAllowed": 0}}, "default")
        [incomplete] = wait_for(lambda: events(one_gpu, "PreemptionIncomplete"), 10, "the refused eviction reported")
        assert "default/guarded (priority 0) was not evicted" in incomplete["message"]
        assert [e.status for e in evictions(one_gpu, "guarded")] == [429]
        assert one_gpu.get("pods", "guarded", "default")["metadata"].get("deletionTimestamp") is None
        for pod in (urgent, one_gpu.create(pending("thief", 0, mem=1000))):
            answer = svc.post("/filter", filter_args(pod, ["node-0"]))
            assert answer["FailedNodes"], f"the GPU is still the guarded pod's: {answer}"
        # The hold expires; the pod is looked at again and the budget, still spent, blocks it.
        wait_for(lambda: events(one_gpu, "PreemptionBlocked"), 10, "the preemption tried again after the hold")
        assert len(evictions(one_gpu, "guarded", dry_run=True)) == 2 and len(evictions(one_gpu, "guarded")) == 1
        assert holds(svc) == [] and sample(svc, "hami_fast_preemptions_total", result="incomplete") == 1


def test_a_refused_preemption_is_tried_again_once_the_budget_allows_it(one_gpu) -> None:
    """A budget's status changing is no node change: the refused pod is looked at again after a
    while all the same, and preempts once the budget allows it."""
    one_gpu.create(ready(running("guarded")))
    one_gpu.create(budget(0))
    with Service(kubeconfig=one_gpu.kubeconfig) as svc:
        started(svc)
        preemptor = svc.runtime.preemptor
        preemptor.blocked_retry = 0.5
        wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the victim in the engine")
        rejected(svc, one_gpu, pending("urgent", 100))
        preemptor.wake()
        wait_for(lambda: events(one_gpu, "PreemptionBlocked"), 5, "the refusal")
        one_gpu.patch("poddisruptionbudgets", "keep", {"status": {"disruptionsAllowed": 1}}, "default")
        wait_for(lambda: one_gpu.get("pods", "guarded", "default") is None, 10, "the victim evicted on a later look")
        assert [e.status for e in evictions(one_gpu, "guarded")] == [201]
        assert len(evictions(one_gpu, "guarded", dry_run=True)) >= 2
        assert preemptor.blocked == {}


def test_an_unreachable_victim_drops_the_hold_and_evicts_no_one(one_gpu) -> None:
    one_gpu.create(running("low"))
    one_gpu.fail("GET", "/api/v1/namespaces/default/pods/low", status=503, times=None)
    with Service(kubeconfig=one_gpu.kubeconfig) as svc:
        started(svc)
        wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the victim in the engine")
        rejected(svc, one_gpu, pending("urgent", 100))
        svc.runtime.preemptor.wake()
        wait_for(lambda: sample(svc, "hami_fast_preemptions_total", result="failed") == 1, 5, "the failure counted")
        assert holds(svc) == [] and not one_gpu.requests("POST", "*/eviction")
        assert keys.RESERVATION not in (one_gpu.get("pods", "urgent", "default")["metadata"].get("annotations") or {})


def stuck(name: str) -> dict[str, Any]:
    """A low-priority running pod that does not go when evicted (a finalizer keeps it)."""
    return running(name, finalizers=["example.com/keep"])


def test_a_victim_that_does_not_go_leaves_the_hold_to_expire_and_no_gpu_is_granted_twice(one_gpu) -> None:
    one_gpu.create(stuck("stuck"))
    with Service(kubeconfig=one_gpu.kubeconfig) as svc:
        started(svc)
        svc.runtime.preemptor.hold_margin = 1.0  # the victim's grace is 0: a hold of about a second
        wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the victim in the engine")
        urgent = rejected(svc, one_gpu, pending("urgent", 100))
        svc.runtime.preemptor.wake()
        wait_for(lambda: evictions(one_gpu, "stuck"), 5, "the eviction")
        assert one_gpu.get("pods", "stuck", "default")["metadata"]["deletionTimestamp"]
        wait_for(lambda: holds(svc) == [], 5, "the hold expired")
        for pod in (urgent, one_gpu.create(pending("thief", 0, mem=1000))):
            answer = svc.post("/filter", filter_args(pod, ["node-0"]))
            assert answer["FailedNodes"], f"the GPU is still the stuck pod's: {answer}"
        passes(svc)
        assert len(evictions(one_gpu, "stuck")) == 1, "a terminating pod is never evicted again"
        # The stuck pod finally goes: the preemptor is retried (put back in kube-scheduler's queue).
        one_gpu.patch("pods", "stuck", {"metadata": {"finalizers": None}}, "default")
        wait_for(
            lambda: keys.REQUEUED_AT in one_gpu.get("pods", "urgent", "default")["metadata"]["annotations"],
            5,
            "retried",
        )


def test_a_restart_evicts_nothing_twice_and_keeps_the_hold(one_gpu) -> None:
    one_gpu.create(stuck("stuck"))
    with Service(kubeconfig=one_gpu.kubeconfig) as svc:
        started(svc)
        wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the victim in the engine")
        rejected(svc, one_gpu, pending("urgent", 100))
        svc.runtime.preemptor.wake()
        wait_for(lambda: evictions(one_gpu, "stuck"), 5, "the eviction")
        held = one_gpu.get("pods", "urgent", "default")["metadata"]["annotations"][keys.RESERVATION]
    with Service(kubeconfig=one_gpu.kubeconfig) as svc:
        started(svc)
        wait_for(lambda: [h["gpus"] for h in holds(svc)] == [["GPU-node-0-0"]], 5, "the hold re-read from the pod")
        rejected(svc, one_gpu, one_gpu.get("pods", "urgent", "default"))
        passes(svc)
        assert len(evictions(one_gpu, "stuck")) == 1
        assert one_gpu.get("pods", "urgent", "default")["metadata"]["annotations"][keys.RESERVATION] == held
        assert not events(one_gpu, "PreemptionBlocked")


def test_preemption_is_off_with_the_flag(one_gpu) -> None:
    one_gpu.create(running("low"))
    with Service(kubeconfig=one_gpu.kubeconfig, vgpu_preemption=False) as svc:
        started(svc)
        assert svc.runtime.preemptor is None and not any(t.name == "preempt" for t in svc.runtime.threads)
        wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the holder in the engine")
        rejected(svc, one_gpu, pending("urgent", 100))
        assert not one_gpu.requests("POST", "*/eviction")
        assert one_gpu.get("pods", "low", "default") is not None


def test_the_flag_is_on_by_default_and_false_turns_it_off() -> None:
    import argparse

    from hami_fast import config

    parser = argparse.ArgumentParser()
    config.add_arguments(parser)
    assert config.load(parser.parse_args([]), environ={}).vgpu_preemption is True
    assert config.load(parser.parse_args(["--vgpu-preemption=false"]), environ={}).vgpu_preemption is False
    assert config.load(parser.parse_args([]), environ={"HAMI_FAST_VGPU_PREEMPTION": "false"}).vgpu_preemption is False


@needs_helm
def test_the_chart_passes_the_flag() -> None:
    extender = "vgpu-scheduler-extender"
    assert "--vgpu-preemption=true" in container(render(), "hf-hami-fast-scheduler", extender)["args"]
    off = render({"scheduler": {"vgpuPreemption": False}})
    assert "--vgpu-preemption=false" in container(off, "hf-hami-fast-scheduler", extender)["args"]

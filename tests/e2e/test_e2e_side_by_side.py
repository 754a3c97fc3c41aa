"""HAMi's real scheduler binary and hami-fast on one real control plane (opt-in, see conftest.py):

1. switch and back: HAMi schedules, then hami-fast, then HAMi again, switched by the webhook and
   kube-scheduler objects an operator changes; after each phase, from API objects alone: no device
   over memory, cores or split count, no exclusive card shared, every earlier pod's allocation
   untouched, and both schedulers' hami_gpu_* gauges equal to what the API holds;
2. a pod that fits nowhere gets the same reasons from both;
3. no lock stalls: N pods onto 2 nodes with an Allocate delay, HAMi vs hami-fast (the figure is
   printed; `make bench-e2e` runs 40 pods / 1 s);
4. retry at release: pods Pending because a terminating pod still holds their GPU bind when it
   goes, hami-fast and HAMi (the times are printed; `make bench-e2e` runs 20 pairs each and gives
   HAMi kube-scheduler's full 5-minute unschedulable flush);
5. vGPU-aware preemption: GPUs full of a Deployment's low-priority pods under a disruption budget,
   a high-priority pod arrives: hami-fast evicts exactly the pods it needs and the pod binds on
   their GPU; with HAMi it stays Pending (its message is printed). `make bench-e2e` runs 10 rounds.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import pytest
from controlplane import SA_USER, wait_for
from kubelet import Kubelet
from preemption_world import (
    Round,
    Timeline,
    allocated,
    preemptor,
    priority_classes,
    read_round,
    replicas,
    scale_to_zero,
    scheduling_message,
    wait_settled,
    workload,
)
from sidebyside import (
    BIND_PHASE,
    FAST,
    GPU_MEM,
    HAMI,
    HAMI_USER,
    BindTracker,
    DevicePlugin,
    SideBySide,
    allocations,
    audit_calls,
    audit_counts,
    control_plane,
    create_namespace,
    create_pods,
    device_usage,
    gpu_pod,
    list_pods,
    log,
    mixed_limits,
    overcommitted,
    register_nodes,
    usage_differences,
)

NODES = [f"sbs-{i}" for i in range(6)]
PODS_PER_PHASE = int(os.environ.get("HAMI_FAST_E2E_SWITCH_PODS", "12"))
LOCK_PODS = int(os.environ.get("HAMI_FAST_E2E_LOCK_PODS", "12"))
LOCK_DELAY = float(os.environ.get("HAMI_FAST_E2E_LOCK_DELAY", "1.0"))
LOCK_HAMI_BUDGET = float(os.environ.get("HAMI_FAST_E2E_LOCK_HAMI_BUDGET", "240"))
RELEASE_PAIRS = int(os.environ.get("HAMI_FAST_E2E_RELEASE_PAIRS", "4"))
RELEASE_HAMI_BUDGET = float(os.environ.get("HAMI_FAST_E2E_RELEASE_HAMI_BUDGET", "45"))
RELEASE_FAST_BUDGET = 60.0
PREEMPT_ROUNDS = int(os.environ.get("HAMI_FAST_E2E_PREEMPT_ROUNDS", "2"))
PREEMPT_REPLICAS = 8  # two per GPU on 2 nodes x 2 GPUs


def release_nodes(which: str) -> list[str]:
    return [f"rel-{which}-{i}" for i in range(RELEASE_PAIRS)]


def preempt_nodes(which: str) -> list[str]:
    return [f"pre-{which}-{i}" for i in range(2)]


@pytest.fixture(scope="module")
def sbs(e2e_workdir, require_side_by_side):
    cp = control_plane(e2e_workdir("side-by-side"))
    plugin = None
    try:
        cp.start()
        # Raised client limits keep the suite short; the scale suite measures HAMi's defaults too.
        s = SideBySide(cp, qps=100, burst=200).setup()
        register_nodes(cp.api, NODES, gpus=4, labels={"pool": "switch"})
        register_nodes(cp.api, ["lock-hami-0", "lock-hami-1"], gpus=2, labels={"pool": "lock-hami"})
        register_nodes(cp.api, ["lock-fast-0", "lock-fast-1"], gpus=2, labels={"pool": "lock-fast"})
        for which in (FAST, HAMI):
            register_nodes(cp.api, release_nodes(which), gpus=1, labels={"pool": f"rel-{which}"})
            register_nodes(cp.api, preempt_nodes(which), gpus=2, labels={"pool": f"pre-{which}"})
        rel = [*release_nodes(FAST), *release_nodes(HAMI), *preempt_nodes(FAST), *preempt_nodes(HAMI)]
        s.wait_nodes_registered([*NODES, "lock-hami-0", "lock-hami-1", "lock-fast-0", "lock-fast-1", *rel])
        plugin = DevicePlugin(cp.api, delay=0.2).start()
        s.plugin = plugin
        yield s
    finally:
        if plugin:
            plugin.stop()
        cp.stop()


def mixed_pods(namespace: str, n: int) -> list[dict]:
    pods = []
    for i in range(n):
        kind, limits = mixed_limits(i)
        pods.append(gpu_pod(f"{kind}-{i}", namespace, limits, node_selector={"pool": "switch"}))
    return pods


def all_allocated(api, namespace: str, n: int) -> bool:
    pods = list_pods(api, namespace)
    done = [p for p in pods if (p["metadata"].get("annotations") or {}).get(BIND_PHASE) == "success"]
    return len(done) == n


def phase(s: SideBySide, which: str, namespace: str, earlier: dict) -> dict:
    s.use(which)
    create_namespace(s.api, namespace)
    pods = mixed_pods(namespace, PODS_PER_PHASE)
    started = time.monotonic()
    create_pods(s.api, pods)
    created = list_pods(s.api, namespace)
    assert {p["spec"].get("schedulerName") for p in created} == {"hami-scheduler"}, "the webhook set schedulerName"
    wait_for(f"{namespace}: every pod bound and allocated", lambda: all_allocated(s.api, namespace, len(pods)), 300, 1)
    log(f"{which}: {len(pods)} mixed pods bound and allocated in {time.monotonic() - started:.1f}s")

    devices = device_usage(s.api)
    assert overcommitted(devices) == []
    still = allocations(s.api, {k.split("/")[0] for k in earlier})
    assert {k: still.get(k) for k in earlier} == earlier, "a running pod's allocation changed"
    for scheduler in (HAMI, FAST):  # both watch the cluster: both must account exactly what the API holds
        wait_for(
            f"{scheduler}'s hami_gpu_* gauges equal the API's allocations",
            lambda sch=scheduler: not usage_differences(s.metric_usage(sch), device_usage(s.api)),
            timeout=30,
            interval=1,
        )
    now = allocations(s.api, [*{k.split("/")[0] for k in earlier}, namespace])
    return now


def test_switch_to_hami_fast_and_back_disturbs_nothing(sbs) -> None:
    held: dict = {}
    held = phase(sbs, HAMI, "phase-1-hami", held)
    sbs.restart(FAST)  # the incoming scheduler starts from the API alone
    held = phase(sbs, FAST, "phase-2-hami-fast", held)
    sbs.restart(HAMI)
    held = phase(sbs, HAMI, "phase-3-hami", held)
    assert len(held) == 3 * PODS_PER_PHASE
    used = [d for d in device_usage(sbs.api).values() if d.pods]
    assert len({d.node for d in used}) >= 2, "the mix spread over more than one node"
    assert any(d.exclusive_pods for d in used) and any(len(d.pods) > 1 for d in used)


def failed_scheduling(api, namespace: str, name: str) -> list[str]:
    events = api.get(f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.name%3D{name}")["items"]
    return sorted({e["message"] for e in events if e["reason"] == "FailedScheduling"})


def filtering_failed(api, namespace: str, name: str) -> list[str]:
    events = api.get(f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.name%3D{name}")["items"]
    return sorted({e["message"] for e in events if e["reason"] == "FilteringFailed"})


@pytest.mark.parametrize(
    ("case", "limits", "annotations"),
    [
        ("memory", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100000}, {}),
        ("count", {"nvidia.com/gpu": 5, "nvidia.com/gpumem": 1000}, {}),
        ("type", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}, {"nvidia.com/use-gputype": "A100"}),
        ("nouse-type", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}, {"nvidia.com/nouse-gputype": "T4"}),
    ],
)
def test_a_pod_that_fits_nowhere_gets_the_same_reasons_from_both(sbs, case, limits, annotations) -> None:
    ns = "fits-nowhere"
    create_namespace(sbs.api, ns)
    messages = {}
    for which in (HAMI, FAST):
        sbs.use(which)
        name = f"{which}-{case}"
        pod = gpu_pod(name, ns, limits, node_selector={"pool": "switch"}, annotations=annotations)
        sbs.api.create(f"/api/v1/namespaces/{ns}/pods", pod)
        messages[which] = wait_for(f"{name}: FailedScheduling", lambda n=name: failed_scheduling(sbs.api, ns, n), 60)
        assert sbs.api.get(f"/api/v1/namespaces/{ns}/pods/{name}")["spec"].get("nodeName") is None
        sbs.api.delete(f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0")
    log(f"fits nowhere {limits}: {messages}")
    assert messages[FAST] == messages[HAMI]


def lock_run(s: SideBySide, which: str, pods: int, budget: float) -> dict:
    """`pods` pods onto the 2 nodes of `which`'s pool, spread (the pods ask for it), each held by the
    device plugin for the Allocate delay: every bind after the first on a node meets a held lock."""
    ns, pool = f"lock-{which}", f"lock-{'fast' if which == FAST else 'hami'}"
    s.use(which)
    create_namespace(s.api, ns)
    tracker = BindTracker(s.api, ns)
    annotations = {"hami.io/node-scheduler-policy": "spread"}
    specs = [
        gpu_pod(f"p-{i}", ns, {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 500}, {"pool": pool}, annotations)
        for i in range(pods)
    ]
    t0 = time.time()
    created = create_pods(s.api, specs)
    try:
        wait_for(f"{which}: {pods} pods bound", lambda: len(tracker.bound) == pods, budget, 0.5)
        done = True
    except TimeoutError:
        done = False
    t1 = time.time()
    tracker.stop()
    bound = sorted(tracker.bound.values())
    waits = sorted(tracker.bound[k] - created[k] for k in tracker.bound)
    calls = audit_counts(s.cp.audit_log, t0, t1 + 1)
    failed = [
        e
        for e in s.api.get(f"/api/v1/namespaces/{ns}/events?fieldSelector=reason%3DBindingFailed")["items"]
        if e["reason"] == "BindingFailed"
    ]
    return {
        "scheduler": which,
        "pods": pods,
        "bound": len(bound),
        "all_bound_s": round((bound[-1] - t0), 1) if done else None,
        "budget_s": budget,
        "p50_s": round(statistics.median(waits), 2) if waits else None,
        "binding_failed_events": sum(e.get("count", 1) for e in failed),
        "nodes": sorted(set(tracker.nodes.values())),
        "calls": dict(calls),
    }


def test_no_lock_stalls_pods_onto_two_nodes_with_an_allocate_delay(sbs) -> None:
    sbs.plugin.delay = LOCK_DELAY
    try:
        fast = lock_run(sbs, FAST, LOCK_PODS, budget=max(60.0, LOCK_PODS * LOCK_DELAY * 3))
        hami = lock_run(sbs, HAMI, LOCK_PODS, budget=LOCK_HAMI_BUDGET)
    finally:
        sbs.plugin.delay = 0.2
    floor = LOCK_PODS / 2 * LOCK_DELAY
    log(f"lock stalls, {LOCK_PODS} pods / 2 nodes / {LOCK_DELAY}s Allocate (serial floor {floor:.0f}s):")
    for r in (fast, hami):
        log(f"  {r}")
    out = os.environ.get("HAMI_FAST_E2E_RESULTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        summary = {"pods": LOCK_PODS, "allocate_delay_s": LOCK_DELAY, "serial_floor_s": floor, "runs": [fast, hami]}
        (Path(out) / "lock.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    assert fast["bound"] == LOCK_PODS and fast["binding_failed_events"] == 0
    assert fast["nodes"] == ["lock-fast-0", "lock-fast-1"]


def whole_gpu_pod(name: str, namespace: str, which: str) -> dict:
    return gpu_pod(name, namespace, {"nvidia.com/gpu": 1, "nvidia.com/gpumem": GPU_MEM}, {"pool": f"rel-{which}"})


def unschedulable(api, namespace: str, names: list[str]) -> bool:
    pods = {p["metadata"]["name"]: p for p in list_pods(api, namespace)}
    return all(
        any(c.get("reason") == "Unschedulable" for c in (pods.get(n, {}).get("status") or {}).get("conditions") or [])
        for n in names
    )


def finish(api, namespace: str, name: str) -> None:
    """What the kubelet writes when the pod's containers exit 0 (a Job's pod done)."""
    done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    status = {"phase": "Succeeded", "containerStatuses": [{"name": "main", "ready": False, "state": done}]}
    api.patch(f"/api/v1/namespaces/{namespace}/pods/{name}/status", {"status": status})


def release_run(s: SideBySide, which: str, budget: float, how: str) -> dict:
    """`RELEASE_PAIRS` 1-GPU nodes, each held whole by a pod; as many pods asking the same wait
    (Unschedulable). `deleted`: every holder is deleted with a grace period (it keeps its GPU while
    it terminates), then goes (force-deleted, as the kubelet removes it); `finished`: every holder's
    containers exit (phase Succeeded, the pod object stays, as a Job's does). How long from then
    until each waiting pod is bound."""
    ns = f"rel-{which}-{how}"
    s.use(which)
    create_namespace(s.api, ns)
    holders = [f"holder-{i}" for i in range(RELEASE_PAIRS)]
    waiters = [f"waiter-{i}" for i in range(RELEASE_PAIRS)]
    create_pods(s.api, [whole_gpu_pod(n, ns, which) for n in holders])
    wait_for(f"{ns}: holders allocated", lambda: all_allocated(s.api, ns, len(holders)), 120, 0.5)
    tracker = BindTracker(s.api, ns)
    create_pods(s.api, [whole_gpu_pod(n, ns, which) for n in waiters])
    wait_for(f"{ns}: waiting pods Unschedulable", lambda: unschedulable(s.api, ns, waiters), 120, 0.5)
    if how == "deleted":
        for name in holders:
            s.api.delete(f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=30")
    time.sleep(3)
    terminating_held = not any(f"{ns}/{n}" in tracker.bound for n in waiters)
    t0 = time.time()
    for name in holders:
        if how == "deleted":
            s.api.delete(f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0")
        else:
            finish(s.api, ns, name)
    try:
        wait_for(
            f"{which}: waiting pods bound", lambda: all(f"{ns}/{n}" in tracker.bound for n in waiters), budget, 0.2
        )
    except TimeoutError:
        pass
    tracker.stop()
    waits = sorted(tracker.bound[f"{ns}/{n}"] - t0 for n in waiters if f"{ns}/{n}" in tracker.bound)
    for name in waiters + (holders if how == "finished" else []):
        s.api.delete(f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0")
    wait_for(f"{ns}: emptied", lambda: not list_pods(s.api, ns), 60, 0.5)
    return {
        "scheduler": which,
        "holder": how,
        "pairs": RELEASE_PAIRS,
        "bound": len(waits),
        "budget_s": budget,
        "p50_s": round(statistics.median(waits), 2) if waits else None,
        "max_s": round(waits[-1], 2) if waits else None,
        "terminating_holder_kept_its_gpu": terminating_held,
    }


@pytest.mark.parametrize("how", ["deleted", "finished"])
def test_pods_waiting_for_a_gpu_bind_when_its_holder_goes(sbs, how) -> None:
    fast = release_run(sbs, FAST, RELEASE_FAST_BUDGET, how)
    hami = release_run(sbs, HAMI, RELEASE_HAMI_BUDGET, how)
    log(f"retry at release ({how}), {RELEASE_PAIRS} pairs, time from the holder gone to the waiting pod bound:")
    for r in (fast, hami):
        log(f"  {r}")
    out = os.environ.get("HAMI_FAST_E2E_RESULTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"release-{how}.json").write_text(json.dumps({"runs": [fast, hami]}, indent=2) + "\n")
    assert fast["terminating_holder_kept_its_gpu"], "a terminating pod's GPU was given away before it went"
    assert fast["bound"] == RELEASE_PAIRS, fast


def emptied(s: SideBySide, namespace: str) -> None:
    scale_to_zero(s.api, namespace)
    wait_for(f"{namespace}: emptied", lambda: not list_pods(s.api, namespace), 60, 0.5)


def preempt_hami(s: SideBySide) -> dict:
    """HAMi: the high-priority pod on the full pool; kube-scheduler's verdict once its own preemption
    step has run, and whether any pod went."""
    ns = pool = f"pre-{HAMI}"
    s.use(HAMI)
    create_namespace(s.api, ns)
    workload(s.api, ns, pool, PREEMPT_REPLICAS)
    kubelet = Kubelet(s.api, ns)
    try:
        wait_settled(s.api, ns, PREEMPT_REPLICAS)
        before = replicas(s.api, ns)
        s.api.create(f"/api/v1/namespaces/{ns}/pods", preemptor("urgent", ns, pool))
        message = wait_for("HAMi: kube-scheduler's verdict", lambda: scheduling_message(s.api, ns, "urgent"), 60, 0.5)
        pod = s.api.get(f"/api/v1/namespaces/{ns}/pods/urgent")
        after = replicas(s.api, ns)
        return {
            "scheduler": HAMI,
            "bound": bool(pod["spec"].get("nodeName")),
            "nominated": (pod.get("status") or {}).get("nominatedNodeName"),
            "victims": sum(1 for uid in before if uid not in after or after[uid].terminating),
            "message": message,
        }
    finally:
        s.api.delete(f"/api/v1/namespaces/{ns}/pods/urgent?gracePeriodSeconds=0")
        emptied(s, ns)
        kubelet.stop()


def preempt_round(s: SideBySide, ns: str, name: str, timeline: Timeline) -> Round:
    before = replicas(s.api, ns)
    created = time.time()
    s.api.create(f"/api/v1/namespaces/{ns}/pods", preemptor(name, ns, ns))
    wait_for(f"{name} bound", lambda: name in timeline.bound, 120, 0.1)
    pod = wait_for(f"{name} allocated", lambda: allocated(s.api, ns, name), 60, 0.2)
    found = read_round(before, replicas(s.api, ns), pod, timeline, created)
    assert overcommitted(device_usage(s.api)) == []
    # The preemptor goes; the Deployment's replacements take the freed GPU (retry at release).
    s.api.delete(f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0")
    wait_settled(s.api, ns, PREEMPT_REPLICAS)
    return found


def preempt_fast(s: SideBySide) -> dict:
    """hami-fast: `PREEMPT_ROUNDS` high-priority pods, one after the other, on the full pool."""
    ns = pool = f"pre-{FAST}"
    s.use(FAST)
    create_namespace(s.api, ns)
    workload(s.api, ns, pool, PREEMPT_REPLICAS)
    kubelet, timeline = Kubelet(s.api, ns), Timeline(s.api, ns).start()
    t0 = time.time()
    try:
        wait_settled(s.api, ns, PREEMPT_REPLICAS)
        timeline.armed = True
        rounds = [preempt_round(s, ns, f"urgent-{i}", timeline) for i in range(PREEMPT_ROUNDS)]
        timeline.armed = False
        calls = audit_calls(s.cp.audit_log, t0, time.time() + 1)
        return {"scheduler": FAST, "rounds": rounds, "budget_margin": timeline.budget_margin, "calls": calls}
    finally:
        emptied(s, ns)
        timeline.stop()
        kubelet.stop()


def p50_max(values: list[float]) -> tuple[float, float]:
    return round(statistics.median(values), 2), round(max(values), 2)


def test_a_high_priority_pod_preempts_with_hami_fast_and_stays_pending_with_hami(sbs) -> None:
    if "kube-controller-manager" not in sbs.cp.procs:
        sbs.cp.start_controller_manager()
    priority_classes(sbs.api)
    try:
        hami = preempt_hami(sbs)
        fast = preempt_fast(sbs)
    finally:
        sbs.cp.procs["kube-controller-manager"].stop()
        del sbs.cp.procs["kube-controller-manager"]
    summaries = [r.summary() for r in fast["rounds"]]
    log(f"preemption, HAMi: {hami}")
    log(f"preemption, hami-fast: {summaries}; budget margin {fast['budget_margin']}")
    if summaries:
        log(f"  created -> bound p50/max {p50_max([r['bound_s'] for r in summaries])} s over {len(summaries)} rounds")
    out = os.environ.get("HAMI_FAST_E2E_RESULTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        body = {"hami": hami, "hami_fast": summaries, "budget_margin": fast["budget_margin"]}
        (Path(out) / "preemption.json").write_text(json.dumps(body, indent=2) + "\n")
    assert not hami["bound"] and hami["victims"] == 0 and not hami["nominated"], hami
    for r in fast["rounds"]:
        assert len(r.victims) == 2 and len(r.victim_gpus) == 1, "exactly the two pods on one GPU went"
        assert r.preemptor_gpus == r.victim_gpus, "the preemptor bound on the victims' GPU"
        assert len(r.replacements) == 2 and not any(x.node for x in r.replacements), "replacements kept off the GPU"
    assert fast["budget_margin"] is not None and fast["budget_margin"] >= 0, "the disruption budget was broken"
    fast_calls = fast["calls"].get(SA_USER, {})
    assert fast_calls.get("create pods/eviction", 0) >= 2 * PREEMPT_ROUNDS and not fast_calls.get("delete pods")
    assert not any(k.startswith(("create pods/eviction", "delete pods")) for k in fast["calls"].get(HAMI_USER, {}))

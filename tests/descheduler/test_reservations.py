"""Reservations against the test API server: `plan --for --apply` holds the freed GPUs on the
pending pod before any move, the scheduler engine reads the hold back from the pod (a restart is a
re-list), and the automatic mode plans for the oldest vGPU-pending pod over opted-in pods only."""

from __future__ import annotations

import re
import threading
import time

import orjson
import pytest
from descheduler_world import NS, FakeReplicaSetAndScheduler, counted, fast, node, pending, pod, recorded
from hami_fast import _native
from hami_fast.descheduler import kube as k
from hami_fast.descheduler.apply import RESERVATION, RESERVATION_EXPIRES, apply_for, clear_reservation
from hami_fast.descheduler.auto import AutoMover, AutoOptions
from hami_fast.descheduler.controller import Controller, ControllerLoop
from hami_fast.descheduler.metrics import DeschedulerMetrics
from hami_fast.descheduler.view import ClusterView

PENDING_PATCH = re.compile(rf"/namespaces/{NS}/pods/big$")
NOW = int(time.time())


def fragmented(kubeapi, movable: tuple[str, ...] = ("a", "b", "c", "d")) -> None:
    """Every 16 GB GPU is partly used; a 14 GB pod fits nowhere until one GPU is emptied."""
    kubeapi.create(node("n1"))
    kubeapi.create(node("n2"))
    for name, n, g, mem in (("a", "n1", 0, 4000), ("b", "n1", 1, 10000), ("c", "n2", 0, 8000), ("d", "n2", 1, 10000)):
        p = pod(name, n, g, mem, app=f"app-{name}")
        if name in movable:
            p["metadata"]["labels"]["hami-fast.io/movable"] = "true"
        kubeapi.create(p)


def engine_from(client) -> _native.Cluster:
    """A scheduler engine started afresh on the API server's objects (what a restart re-lists)."""
    cluster = _native.Cluster()
    nodes, pods = k.snapshot_inputs(client)
    cluster.apply_list_page(nodes)
    _, _, _, errors = cluster.apply_list_page(pods)
    assert errors == []
    return cluster


def decide(cluster: _native.Cluster, pod_obj: dict) -> _native.FilterDecision:
    args = {"Pod": pod_obj, "Nodes": None, "NodeNames": ["n1", "n2"]}
    return cluster.decide(orjson.dumps(args), NOW, record=False)


def test_plan_for_apply_holds_the_freed_gpus_before_the_first_move(kubeapi, client):
    fragmented(kubeapi)
    kubeapi.create(pending())
    big = kubeapi.get("pods", "big", NS)
    result = orjson.loads(_native.plan(k.snapshot_inputs(client), orjson.dumps({"for_pod": big, "max_moves": 3})))
    assert result["unblocked"] and result["moves"], result["message"]
    hold = result["reservation"]
    assert hold["uid"] == big["metadata"]["uid"]
    stop = threading.Event()
    leading = threading.Event()
    leading.set()
    ControllerLoop(Controller(client, fast()), leading, stop, period=0.05).start()
    mem = {"app-a": 4000, "app-b": 10000, "app-c": 8000, "app-d": 10000}
    FakeReplicaSetAndScheduler(kubeapi, client, stop, mem).start()
    try:
        done = apply_for(client, result, ttl=300, interval=0.1, timeout=20, say=lambda m: None)
    finally:
        stop.set()
    assert [r["phase"] for r in done] == ["Completed"] * len(result["moves"]), done
    first_patch = kubeapi.requests("PATCH", PENDING_PATCH)[0].seq
    first_placement = kubeapi.requests("create", re.compile("hamipodplacements$"))[0].seq
    assert first_patch < first_placement, "the hold is written before any placement"
    ann = kubeapi.get("pods", "big", NS)["metadata"]["annotations"]
    assert ann[RESERVATION] == f"{hold['node']}/{','.join(hold['gpus'])}"
    assert ann[RESERVATION_EXPIRES].endswith("Z")
    # A scheduler (re)started now reads the hold from the pod: a stranger cannot take the freed
    # GPU, the owner lands exactly there.
    engine = engine_from(client)
    stranger = decide(engine, pending("stranger"))
    assert stranger.node is None
    assert "CardReserved" in stranger.response.decode()
    owner = decide(engine, kubeapi.get("pods", "big", NS))
    assert owner.node == hold["node"]
    assert owner.devices.split(",")[0] == hold["gpus"][0]
    clear_reservation(client, "serving/big")
    assert RESERVATION not in (kubeapi.get("pods", "big", NS)["metadata"].get("annotations") or {})
    assert decide(engine_from(client), pending("stranger")).node == hold["node"]


def test_nothing_is_written_when_the_pod_cannot_be_unblocked(kubeapi, client):
    fragmented(kubeapi)
    kubeapi.create(pending(mem=17000))
    big = kubeapi.get("pods", "big", NS)
    result = orjson.loads(_native.plan(k.snapshot_inputs(client), orjson.dumps({"for_pod": big})))
    assert not result["unblocked"] and result["reservation"] is None
    assert apply_for(client, result, ttl=300, say=lambda m: None) == []
    assert kubeapi.count("PATCH") == 0 and kubeapi.count("create", re.compile("hamipodplacements$")) == 0


def test_a_malformed_reservation_is_one_line_and_ignored(kubeapi, client):
    fragmented(kubeapi)
    bad = pending()
    bad["metadata"]["annotations"] = {RESERVATION: "GPU-n1-0", RESERVATION_EXPIRES: "2999-01-01T00:00:00Z"}
    kubeapi.create(bad)
    cluster = _native.Cluster()
    nodes, pods = k.snapshot_inputs(client)
    cluster.apply_list_page(nodes)
    _, _, keys, errors = cluster.apply_list_page(pods)
    assert len(keys) == 5 and len(errors) == 1
    assert "Pod serving/big" in errors[0] and RESERVATION in errors[0] and "\n" not in errors[0]
    assert cluster.pod_count() == 4, "the other pods' allocations are all read"
    # Nothing held: a 6 GB pod takes any free share.
    assert decide(cluster, pending("small", mem=6000)).node is not None


def waiting_for_vgpu(p: dict) -> bool:
    """Whether the engine's view counts the pod as waiting for room that moves can make."""
    view = ClusterView.of_snapshot(orjson.dumps({"kind": "List", "items": [node("n1"), p]}))
    return [key for key, _ in view.waiting_for_moves()] == [f"{NS}/{p['metadata']['name']}"]


def test_waiting_for_vgpu_reads_the_pod_scheduled_condition():
    assert waiting_for_vgpu(pending())
    assert not waiting_for_vgpu(pending(unschedulable=False))
    other = pending()
    other["status"]["conditions"][0]["message"] = "0/2 nodes are available: 2 node(s) had untolerated taint."
    assert not waiting_for_vgpu(other)
    bound = pending()
    bound["spec"]["nodeName"] = "n1"
    assert not waiting_for_vgpu(bound)
    held = pending()
    held["metadata"]["annotations"] = {RESERVATION: "n1/GPU-n1-0", RESERVATION_EXPIRES: "2999-01-01T00:00:00Z"}
    assert not waiting_for_vgpu(held), "a pod with a live hold is being worked on already"


@pytest.mark.parametrize(
    ("words", "waiting"),
    [
        ("2 1/2 CardInsufficientCore", True),
        ("2 NodeInsufficientDevice", True),
        ("2 Insufficient nvidia.com/gpu", True),
        ("2 2/2 CardTypeMismatch", False),
        ("2 1/1 CardNotHealth", False),
    ],
)
def test_only_reasons_that_moves_can_clear_count_as_waiting_for_vgpu(words, waiting):
    p = pending()
    p["status"]["conditions"][0]["message"] = f"0/2 nodes are available: {words}."
    assert waiting_for_vgpu(p) is waiting


@pytest.mark.parametrize("dry_run", [True, False])
def test_auto_moves_only_opted_in_pods_for_the_oldest_pending_pod(kubeapi, client, dry_run):
    # Only c (8 GB on n2) may move: emptying n2's first GPU is the one way allowed.
    fragmented(kubeapi, movable=("c",))
    kubeapi.create(pending())
    kubeapi.create(pending("not-vgpu", unschedulable=False))
    stop = threading.Event()
    leading = threading.Event()
    leading.set()
    if not dry_run:
        ControllerLoop(Controller(client, fast()), leading, stop, period=0.05).start()
        mem = {"app-a": 4000, "app-b": 10000, "app-c": 8000, "app-d": 10000}
        FakeReplicaSetAndScheduler(kubeapi, client, stop, mem).start()
    metrics = DeschedulerMetrics()
    options = AutoOptions(max_moves_per_hour=1, dry_run=dry_run, interval=0.1, move_timeout=20)
    mover = AutoMover(client, options, metrics)
    try:
        did = mover.run_once()
        assert mover.wait(30), "the run ended"
    finally:
        stop.set()
    assert did is not None and did["pod"] == "serving/big"
    assert [m["pod"] for m in did["moves"]] == ["serving/c"]
    selected = [r for r in kubeapi.requests("list") if r.resource == "pods" and "labelSelector" in r.query]
    assert selected == [], "the opt-in is read from the planner's objects, not listed by selector"
    ann = kubeapi.get("pods", "big", NS)["metadata"].get("annotations") or {}
    if dry_run:
        assert did["moved"] == 0 and RESERVATION not in ann
        assert kubeapi.count("create", re.compile("hamipodplacements$")) == 0
        events = [e for e in kubeapi.list("events", NS) if e["reason"] == "WouldMove"]
        assert len(events) == 1 and "serving/c" in events[0]["message"]
        assert events[0]["involvedObject"]["name"] == "big"
        mover.run_once()
        assert len([e for e in kubeapi.list("events", NS) if e["reason"] == "WouldMove"]) == 1, "announced once"
        assert passes(metrics) == {"dry_run": 2}
        assert kubeapi.list("configmaps", "kube-system") == [], "a dry run records nothing"
    else:
        [run] = mover.finished
        assert run["moved"] == 1 and ann[RESERVATION] == "n2/GPU-n2-0"
        assert mover.budget(time.time()) == 0
        assert mover.run_once() is None, "the hour's budget is spent"
        assert passes(metrics) == {"started": 1, "budget_spent": 1}
        assert counted(metrics, "hami_fast_descheduler_auto_runs_total", "result") == {"moved": 1}
        [placement] = kubeapi.list("hamipodplacements.scheduling.hami.placement.com", NS)
        [entry] = recorded(kubeapi)
        assert entry["reqID"] == placement["spec"]["reqID"] and entry["pod"] == "serving/c"
        assert entry["for"] == "serving/big"
        # Deleting the placement forgets nothing: a restart (or a new leader) reads the record.
        kubeapi.delete("hamipodplacements.scheduling.hami.placement.com", placement["metadata"]["name"], NS)
        restarted = AutoMover(client, options)
        assert restarted.budget(time.time()) == 0, "the record survives the deleted placement and the restart"
        assert restarted.budget(time.time() + 3601) == 1, "an hour later it is free again"


def passes(metrics: DeschedulerMetrics) -> dict[str, float]:
    """`hami_fast_descheduler_auto_passes_total` by outcome, the zero ones left out."""
    from prometheus_client.parser import text_string_to_metric_families

    return {
        s.labels["outcome"]: s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
        if s.name == "hami_fast_descheduler_auto_passes_total" and s.value
    }


def test_auto_passes_without_a_waiting_pod_or_a_plan_are_counted(kubeapi, client):
    fragmented(kubeapi, movable=())
    metrics = DeschedulerMetrics()
    mover = AutoMover(client, AutoOptions(), metrics)
    assert mover.run_once() is None
    kubeapi.create(pending())
    assert mover.run_once() is None, "nothing opted in: no move"
    assert passes(metrics) == {"idle": 1, "no_plan": 1}
    assert kubeapi.count("create", re.compile("hamipodplacements$")) == 0

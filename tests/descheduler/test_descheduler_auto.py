"""`--auto` with its moves in the background, against the test API server: a blocked eviction never
delays a pass, runs are bounded (one per pending pod, a cap at once), the hour's budget is held
when a run starts and checked again before each move (never exceeded with runs in flight), and
the record of the hour's moves (a ConfigMap) is bounded, pruned, retried on a lost race, and gives
back a move whose eviction was refused."""

from __future__ import annotations

import re
import threading
import time

import orjson
import pytest
from descheduler_world import NS, counted, node, pending, pod, recorded
from hami_fast.descheduler.auto import AutoLoop, AutoMover, AutoOptions, Run
from hami_fast.descheduler.controller import Controller, ControllerLoop, Timeouts
from hami_fast.descheduler.ledger import MoveLedger
from hami_fast.descheduler.metrics import DeschedulerMetrics

PLACEMENTS = re.compile("hamipodplacements$")
MOVABLE = {"hami-fast.io/movable": "true"}


def one_small_pod_per_gpu(kubeapi, nodes: int = 3) -> None:
    """Every 16 GB GPU holds one movable 4 GB pod: a 14 GB pod fits once one of them moves aside."""
    for n in range(nodes):
        kubeapi.create(node(f"n{n}"))
        for g in range(2):
            p = pod(f"s{n}{g}", f"n{n}", g, 4000, app=f"app-{n}{g}")
            p["metadata"]["labels"].update(MOVABLE)
            kubeapi.create(p)


def budget_says_no(kubeapi) -> None:
    """A disruption budget that refuses every eviction of the movable pods (429)."""
    kubeapi.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb", "namespace": NS},
            "spec": {"selector": {"matchLabels": MOVABLE}, "minAvailable": 6},
            "status": {"disruptionsAllowed": 0},
        }
    )


def waiting(kubeapi, count: int) -> None:
    for i in range(count):
        p = pending(f"big-{i}")
        p["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:0{i}Z"
        kubeapi.create(p)


@pytest.fixture
def controller(client):
    """The leader's placement controller, running until the test ends."""
    stop, leading = threading.Event(), threading.Event()
    leading.set()

    def start(eviction: float = 60.0) -> None:
        timeouts = Timeouts(eviction=eviction, replacement=30, bind=30, backoff_min=0.05, backoff_max=0.2)
        ControllerLoop(Controller(client, timeouts), leading, stop, period=0.05).start()

    yield start
    stop.set()


@pytest.fixture
def movers():
    """Movers made by a test; their runs are stopped at its end."""
    made: list[AutoMover] = []

    def make(client, metrics: DeschedulerMetrics | None = None, **options) -> AutoMover:
        defaults = {"interval": 0.05, "move_timeout": 60, "period": 0.05}
        mover = AutoMover(client, AutoOptions(**{**defaults, **options}), metrics)
        made.append(mover)
        return mover

    yield make
    for mover in made:
        mover.stop.set()
        assert mover.wait(10)


def passes(metrics: DeschedulerMetrics) -> dict[str, float]:
    return counted(metrics, "hami_fast_descheduler_auto_passes_total", "outcome")


def gauge(metrics: DeschedulerMetrics, name: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    families = text_string_to_metric_families(metrics.render().decode())
    return next(s.value for f in families for s in f.samples if s.name == name)


def wait_until(what: str, check, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def refused_evictions(kubeapi) -> int:
    return sum(1 for r in kubeapi.requests("create", re.compile(r"/eviction$")) if r.status == 429)


def blocked(kubeapi, controller, pending: int, nodes: int = 3, eviction: float = 60.0) -> DeschedulerMetrics:
    """`pending` pods waiting, each unblocked by one move a disruption budget refuses for `eviction` s."""
    one_small_pod_per_gpu(kubeapi, nodes)
    budget_says_no(kubeapi)
    waiting(kubeapi, pending)
    controller(eviction)
    return DeschedulerMetrics()


def test_a_blocked_eviction_does_not_delay_the_next_pass(kubeapi, client, controller, movers):
    metrics = blocked(kubeapi, controller, pending=2)
    mover = movers(client, metrics, max_moves_per_hour=6, max_concurrent_moves=2)
    stop, leading = threading.Event(), threading.Event()
    leading.set()
    AutoLoop(mover, leading, stop).start()
    try:
        # The first run's eviction is refused over and over; the next pass starts the second run anyway.
        wait_until("two runs in flight", lambda: mover.in_flight()[0] == 2)
        wait_until("both placements refused by the budget", lambda: refused_evictions(kubeapi) >= 4)
        assert sorted(mover.runs) == [f"{NS}/big-0", f"{NS}/big-1"]
        placements = kubeapi.list("hamipodplacements.scheduling.hami.placement.com", NS)
        messages = [p["status"]["message"] for p in placements]
        assert [p["status"]["phase"] for p in placements] == ["Pending"] * 2, messages
        assert all("disruption budget" in m for m in messages), messages
        runs = list(mover.runs.values())
        assert not runs[0].nodes() & runs[1].nodes(), "the second plan keeps off the nodes the first is changing"
        assert len({p["spec"]["evictPod"] for p in placements}) == 2, "one move per pod at a time"
        # The loop keeps its cadence (a pass every 50 ms) while both runs wait: capped, it says busy.
        before = passes(metrics).get("busy", 0)
        wait_until("passes while the runs are blocked", lambda: passes(metrics).get("busy", 0) >= before + 5)
        assert mover.in_flight()[0] == 2 and refused_evictions(kubeapi) >= 4, "still blocked meanwhile"
        assert passes(metrics)["started"] == 2
        assert gauge(metrics, "hami_fast_descheduler_auto_runs_in_flight") == 2
        assert gauge(metrics, "hami_fast_descheduler_auto_moves_reserved") == 0, "each run's one move has begun"
        assert kubeapi.count("create", PLACEMENTS) == 2
    finally:
        stop.set()


def test_the_hour_budget_is_never_exceeded_with_runs_in_flight(kubeapi, client, controller, movers):
    metrics = blocked(kubeapi, controller, pending=3)
    mover = movers(client, metrics, max_moves_per_hour=2, max_concurrent_moves=3)
    for _ in range(6):
        mover.run_once()
    wait_until("two placements", lambda: kubeapi.count("create", PLACEMENTS) == 2)
    assert passes(metrics) == {"started": 2, "budget_spent": 4}, "the third pending pod waits for the hour"
    assert len(recorded(kubeapi)) == 2 and mover.budget(time.time()) == 0
    time.sleep(0.3)
    assert kubeapi.count("create", PLACEMENTS) == 2

    # Another writer (an old leader) recorded a move after this run was planned: checked again
    # right before the move begins, the run does not start it.
    late = Run(f"{NS}/big-2", [{"pod": f"{NS}/s20"}], "late")
    with mover._runs_lock:
        mover.runs[late.pod] = late
    try:
        refused = mover._starting(late, late.moves[0], "plan-late-0000")
    finally:
        with mover._runs_lock:
            mover.runs.pop(late.pod)
    assert refused == "--max-moves-per-hour 2 reached"
    assert len(recorded(kubeapi)) == 2


def test_two_leaders_racing_for_the_last_move_start_one(kubeapi, client, movers):
    """An old leader still finishing and the new one both check the cap and record: the record is
    written with the resourceVersion the check read, so the second write is read again, and the
    check, made again on what the first wrote, says no."""
    one_small_pod_per_gpu(kubeapi, nodes=1)
    old, new = movers(client, max_moves_per_hour=1), movers(client, max_moves_per_hour=1)
    runs = {m: Run(f"{NS}/big-{i}", [{"pod": f"{NS}/s0{i}"}], f"r{i}") for i, m in enumerate((old, new))}
    for mover, run in runs.items():
        mover.runs[run.pod] = run
    read = new.ledger._read

    def read_then_lose_the_race():
        seen = read()
        if not kubeapi.get("configmaps", "hami-gpu-descheduler-auto-moves", "kube-system"):
            assert old._starting(runs[old], runs[old].moves[0], "plan-old-0000") == ""
        return seen

    new.ledger._read = read_then_lose_the_race
    assert new._starting(runs[new], runs[new].moves[0], "plan-new-0000") == "--max-moves-per-hour 1 reached"
    assert [e["reqID"] for e in recorded(kubeapi)] == ["plan-old-0000"]
    for mover, run in runs.items():
        mover.runs.pop(run.pod)


def test_a_move_whose_eviction_was_refused_is_given_back(kubeapi, client, controller, movers):
    # The budget refuses longer than the eviction timeout: the placement fails, nothing was evicted.
    metrics = blocked(kubeapi, controller, pending=1, nodes=2, eviction=0.5)
    mover = movers(client, metrics, max_moves_per_hour=1)
    assert mover.run_once()["pod"] == f"{NS}/big-0"
    assert mover.budget(time.time()) == 0, "held while the run goes on"
    assert mover.wait(20)
    [run] = mover.finished
    assert run["moved"] == 0 and run["results"][0]["phase"] == "Failed", run
    assert counted(metrics, "hami_fast_descheduler_auto_runs_total", "result") == {"refused": 1}
    assert recorded(kubeapi) == [], "taken off the record"
    assert mover.budget(time.time()) == 1


def test_a_run_stops_starting_moves_once_its_replica_no_longer_leads(kubeapi, client, movers):
    one_small_pod_per_gpu(kubeapi, nodes=2)
    waiting(kubeapi, 1)
    leads = [True]
    mover = movers(client, max_moves_per_hour=4)
    mover.leading = lambda: leads[0]
    leads[0] = False
    assert mover.run_once() is not None
    assert mover.wait(10)
    [run] = mover.finished
    assert run["results"][0]["phase"] == "Skipped" and "no longer leads" in run["results"][0]["message"]
    assert kubeapi.count("create", PLACEMENTS) == 0 and recorded(kubeapi) == []


# -- the record -----------------------------------------------------------------------------------


def stamp(seconds_ago: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds_ago))


def test_the_record_is_pruned_to_the_hour_and_bounded(kubeapi, client):
    ledger = MoveLedger(client, "kube-system", "moves", cap=3)
    now = time.time()
    ledger.record({"reqID": "old", "pod": "a/x", "for": "a/p", "at": stamp(3700)}, now)
    assert ledger.entries(now) == [], "older than an hour: not counted"
    for i in range(5):
        ledger.record({"reqID": f"r{i}", "pod": "a/x", "for": "a/p"}, now)
    assert [e["reqID"] for e in ledger.entries(now)] == ["r2", "r3", "r4"], "the newest `cap`, the old one pruned"
    assert [e["reqID"] for e in recorded(kubeapi, "moves")] == ["r2", "r3", "r4"]
    ledger.forget("r3", now)
    assert [e["reqID"] for e in ledger.entries(now)] == ["r2", "r4"]
    configmap = kubeapi.get("configmaps", "moves", "kube-system")
    assert configmap["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "hami-fast-descheduler-auto"


def test_the_record_survives_a_lost_race_and_a_hand_edit(kubeapi, client):
    ledger = MoveLedger(client, "kube-system", "moves")
    now = time.time()
    ledger.record({"reqID": "a", "pod": "x/y", "for": "x/p"}, now)
    kubeapi.fail("update", "/api/v1/namespaces/kube-system/configmaps/moves", status=409, times=2)
    ledger.record({"reqID": "b", "pod": "x/y", "for": "x/p"}, now)
    assert [e["reqID"] for e in ledger.entries(now)] == ["a", "b"], "read again and retried, nothing overwritten"
    kubeapi.patch("configmaps", "moves", {"data": {"moves": "not json"}}, "kube-system")
    assert ledger.entries(now) == []
    ledger.record({"reqID": "c", "pod": "x/y", "for": "x/p"}, now)
    assert [e["reqID"] for e in ledger.entries(now)] == ["c"]
    bad_stamp = orjson.dumps([{"reqID": "d", "at": "yesterday"}, {"reqID": "e", "at": stamp(10)}]).decode()
    kubeapi.patch("configmaps", "moves", {"data": {"moves": bad_stamp}}, "kube-system")
    assert [e["reqID"] for e in ledger.entries(now)] == ["e"]


def test_a_record_that_cannot_be_written_starts_no_move(kubeapi, client, movers):
    one_small_pod_per_gpu(kubeapi, nodes=2)
    waiting(kubeapi, 1)
    kubeapi.fail("create", "/api/v1/namespaces/kube-system/configmaps", status=403, times=None)
    mover = movers(client, max_moves_per_hour=4)
    assert mover.run_once() is not None
    assert mover.wait(10)
    [run] = mover.finished
    assert run["results"][0]["phase"] == "Skipped"
    assert "not recorded in ConfigMap kube-system/hami-gpu-descheduler-auto-moves" in run["results"][0]["message"]
    assert kubeapi.count("create", PLACEMENTS) == 0, "no move without its record"

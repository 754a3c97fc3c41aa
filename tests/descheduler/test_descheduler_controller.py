"""Descheduler controller completeness against the test Kubernetes API server: informers (list once,
then watch; re-list on 410; reconnect after a drop), event-driven reconciles, conditions[], every
phase, the placement TTL, bad input evicting nothing, and the Prometheus metrics."""

# ruff: noqa: F811  (the descheduler world's fixtures are imported, then named as parameters)
from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
import yaml
from descheduler_world import (
    EVICTIONS,
    NS,
    admission,
    bind,
    create_placement,
    fast,
    free_port,
    make_pinner,
    patched,
    placement,
    pod,
    replacement,
    sees,
    status_of,
)
from hami_fast.descheduler import kube as k
from hami_fast.descheduler import status as s
from hami_fast.descheduler.cache import ObjectStore
from hami_fast.descheduler.controller import Controller, ControllerLoop, Timeouts, WorkQueue
from hami_fast.descheduler.metrics import DeschedulerMetrics
from hami_fast.descheduler.placement import Placement, StatusUpdate
from hami_fast.descheduler.webhook import Pinner
from prometheus_client.parser import text_string_to_metric_families

PLACEMENT_LISTS = re.compile(r"/hamipodplacements$")
CRD = Path(__file__).resolve().parents[2] / "deploy" / "crds" / "hamipodplacements.scheduling.hami.placement.com.yaml"


def crd_status_schema() -> dict:
    crd = yaml.safe_load(CRD.read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]


def wait_phase(kubeapi, name: str, phase: str, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = status_of(kubeapi, name)
        if st.get("phase") == phase:
            return st
        time.sleep(0.05)
    raise AssertionError(f"{name} never reached {phase}: {status_of(kubeapi, name)}")


def conditions(st: dict) -> dict[str, dict]:
    return {c["type"]: c for c in st.get("conditions") or []}


def hours_ago(hours: float) -> str:
    return (datetime.now(UTC) - timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def old_placement(kubeapi, name: str, gpus: list[str], evict: str | None = None, hours: float = 2.0) -> None:
    """Seeded as stored objects are: the creationTimestamp is kept, so the TTL can be tested without waiting."""
    body = placement(name, "n1", gpus, evict=evict)
    body["metadata"].update(creationTimestamp=hours_ago(hours), uid=f"uid-{name}", generation=1)
    kubeapi.create(body)


@pytest.fixture
def loops():
    """Controller loops started by a test, stopped at its end."""
    started: list[threading.Event] = []

    def start(client, timeouts: Timeouts | None = None, period: float = 3600.0) -> tuple[Controller, threading.Event]:
        stop, leading = threading.Event(), threading.Event()
        leading.set()
        controller = Controller(client, timeouts or fast())
        ControllerLoop(controller, leading, stop, period=period).start()
        started.append(stop)
        assert controller.placements.wait_synced(5) and controller.pods.wait_synced(5)
        return controller, stop

    yield start
    for stop in started:
        stop.set()


def assert_nothing_evicted(kubeapi) -> None:
    assert kubeapi.count("create", EVICTIONS) == 0
    assert kubeapi.get("pods", "old", NS) is not None


def admit_replacement(kubeapi, pinner: Pinner, name: str) -> dict | None:
    """The ReplicaSet's new pod through the webhook, then created (as the API server would)."""
    new = patched(replacement(), pinner.admit(admission(replacement(), uid=name)))
    if new is not None:
        new["metadata"]["name"] = name
        kubeapi.create(new)
    return new


# -- watches -------------------------------------------------------------------------------------


def test_webhook_reads_placements_from_memory(cluster, client):
    create_placement(cluster, placement("pin", "n1", ["gpu-1"]))
    Controller(client, fast()).reconcile_all()
    pinner = make_pinner(client)
    sees(pinner, "pin", "Pending")
    cluster.clear_log()
    answers = [patched(replacement(), pinner.admit(admission(replacement(), uid=f"r{i}"))) for i in range(6)]
    assert sum(a is not None for a in answers) == 1
    assert cluster.count("list", PLACEMENT_LISTS) == 0, "admissions read the informer's cache"
    assert cluster.count("GET", "/apis/*/hamipodplacements/*") == 0, "the claim came from the cache, no re-read"
    assert status_of(cluster, "pin")["claimedBy"]


def test_webhook_cache_relists_on_410_and_resumes_after_a_dropped_watch(cluster, client):
    create_placement(cluster, placement("a", "n1", ["gpu-1"]))
    pinner = make_pinner(client)
    informer = pinner.informer()
    assert informer.wait_synced(5)
    stats = informer.reflector.stats
    assert stats.lists == 1 and set(informer.store.keys()) == {f"{NS}/a"}

    # A change while the watch hears nothing, then its resourceVersion is compacted away: 410 -> re-list.
    cluster.wait_for_watches(1, PLACEMENT_LISTS)
    cluster.stall_watches(PLACEMENT_LISTS)
    create_placement(cluster, placement("b", "n1", ["gpu-1"]))
    cluster.delete("hamipodplacements", "a", NS)
    cluster.compact()
    cluster.drop_watches(PLACEMENT_LISTS, graceful=True)
    cluster.unstall_watches()
    assert informer.store.wait_until(lambda st: set(st.keys()) == {f"{NS}/b"}, 10), informer.store.keys()
    assert stats.lists == 2 and stats.errors == 0, "re-listed after 410 Gone (not an error path)"

    # A connection cut mid-stream: back off and watch again from the last resourceVersion, no re-list.
    cluster.wait_for_watches(1, PLACEMENT_LISTS)
    assert cluster.drop_watches(PLACEMENT_LISTS) >= 1
    create_placement(cluster, placement("c", "n1", ["gpu-1"]))
    assert informer.store.wait_until(lambda st: f"{NS}/c" in st.keys(), 10)
    assert stats.errors >= 1 and stats.resumed >= 1 and stats.lists == 2

    # An API server restart: the same.
    cluster.restart_server()
    create_placement(cluster, placement("d", "n1", ["gpu-1"]))
    assert informer.store.wait_until(lambda st: f"{NS}/d" in st.keys(), 15)


def test_a_follower_whose_watch_lags_still_pins_the_replacement(cluster, client):
    """Two replicas: the leader validates a placement and evicts; the replacement reaches the
    follower's webhook, whose placement watch has not delivered the placement yet."""
    follower = make_pinner(client, leading=lambda: False)
    informer = follower.informer()
    assert informer.wait_synced(5)
    cluster.wait_for_watches(1, PLACEMENT_LISTS)
    cluster.stall_watches(PLACEMENT_LISTS)  # the follower's watch hears nothing from here on
    try:
        create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
        leader = Controller(client, fast())
        leader.reconcile_all()
        leader.reconcile_all()
        assert status_of(cluster, "move")["phase"] == "DeletingOldPod"
        assert informer.store.get(f"{NS}/move") is None, "the follower's cache lags"
        cluster.clear_log()
        new = admit_replacement(cluster, follower, "infer-r")
        assert new is not None, "pinned after one consistent read"
        assert new["metadata"]["annotations"][k.STAMP_TARGET] == "n1/GPU-n1-1"
        assert cluster.count("list", PLACEMENT_LISTS) == 1
        assert status_of(cluster, "move")["claimedBy"]["generateName"] == "infer-"

        # A pod no placement wants costs the follower that one read, each time.
        cluster.clear_log()
        other = replacement()
        other["metadata"]["labels"] = {"app": "unrelated"}
        assert patched(other, follower.admit(admission(other, uid="f1"))) is None
        assert patched(other, follower.admit(admission(other, uid="f2"))) is None
        assert cluster.count("list", PLACEMENT_LISTS) == 2
    finally:
        cluster.unstall_watches()


def unrelated() -> dict:
    other = replacement()
    other["metadata"]["labels"] = {"app": "unrelated"}
    return other


def elsewhere(uid: str) -> bytes:
    """The admission of a labelled pod in another namespace (no placement wants it)."""
    review = orjson.loads(admission(unrelated(), uid=uid))
    review["request"]["namespace"] = review["request"]["object"]["metadata"]["namespace"] = "batch"
    return orjson.dumps(review)


def test_a_new_leader_whose_watch_stalls_past_the_lease_period_still_pins_the_replacement(cluster, client):
    """The previous leader validated a placement and evicted its pod while the new leader's
    placement watch was stalled. The new leader's first miss (another namespace) reads only that
    namespace; the replacement arrives more than a lease period (15 s) later. No time makes a
    stalled cache trustworthy, only the watch passing the term's first consistent read does."""
    now = [100.0]
    leader = make_pinner(client, leading=lambda: True, term=lambda: 1, clock=lambda: now[0])
    informer = leader.informer()
    assert informer.wait_synced(5)
    cluster.wait_for_watches(1, PLACEMENT_LISTS)
    cluster.stall_watches(PLACEMENT_LISTS)
    try:
        create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
        previous = Controller(client, fast())
        previous.reconcile_all()
        previous.reconcile_all()
        assert status_of(cluster, "move")["phase"] == "DeletingOldPod"
        cluster.clear_log()
        assert patched(unrelated(), leader.admit(elsewhere("l1"))) is None
        assert cluster.count("list", PLACEMENT_LISTS) == 1, "a new leader confirms its misses"
        assert informer.store.get(f"{NS}/move") is None, "the new leader's cache lags"
        now[0] += 20.0
        cluster.clear_log()
        new = admit_replacement(cluster, leader, "infer-r")
        assert new is not None, "pinned: the stalled watch has not passed the term's first read"
        assert new["metadata"]["annotations"][k.STAMP_TARGET] == "n1/GPU-n1-1"
        assert cluster.count("list", PLACEMENT_LISTS) == 1
        assert leader.catch_up is not None and leader.catch_up.caught_up_after is None
    finally:
        cluster.unstall_watches()
    # The watch resumes: once it has delivered the term's first read (an event or a bookmark),
    # the cache is trusted and a miss costs nothing.
    target = leader.catch_up.target
    assert target is not None
    cluster.send_bookmarks()
    stats = informer.reflector.stats
    assert informer.store.wait_until(lambda _: int(stats.resource_version or 0) >= target, 10), stats
    cluster.clear_log()
    assert patched(unrelated(), leader.admit(admission(unrelated(), uid="l2"))) is None
    assert patched(unrelated(), leader.admit(admission(unrelated(), uid="l3"))) is None
    assert cluster.count("list", PLACEMENT_LISTS) == 0, "a caught-up leader trusts its cache"
    assert leader.catch_up.caught_up_after == 20.0


def test_a_new_term_confirms_again_until_its_own_read_is_passed(cluster, client):
    """Leadership lost and won back between two admissions is a new term: the cache must pass a
    read taken in that term, not an older one."""
    term = [1]
    leader = make_pinner(client, leading=lambda: True, term=lambda: term[0])
    informer = leader.informer()
    assert informer.wait_synced(5)
    cluster.clear_log()
    assert patched(unrelated(), leader.admit(admission(unrelated(), uid="a1"))) is None
    first = leader.catch_up.target
    stats = informer.reflector.stats
    cluster.send_bookmarks()
    assert informer.store.wait_until(lambda _: int(stats.resource_version or 0) >= first, 10)
    assert patched(unrelated(), leader.admit(admission(unrelated(), uid="a2"))) is None
    assert cluster.count("list", PLACEMENT_LISTS) == 1, "caught up within the first term"

    term[0] = 2
    cluster.wait_for_watches(1, PLACEMENT_LISTS)
    cluster.stall_watches(PLACEMENT_LISTS)
    try:
        create_placement(cluster, placement("unseen", "n1", ["gpu-1"], app="elsewhere"))
        cluster.clear_log()
        assert patched(unrelated(), leader.admit(admission(unrelated(), uid="b1"))) is None
        assert patched(unrelated(), leader.admit(admission(unrelated(), uid="b2"))) is None
        assert cluster.count("list", PLACEMENT_LISTS) == 2, "a new term trusts nothing its watch has not passed"
        assert leader.catch_up.term == 2 and leader.catch_up.target > first
    finally:
        cluster.unstall_watches()


def test_controller_moves_on_watch_events_and_resumes_after_a_restart(cluster, client, loops):
    # No resync within the test: everything below is driven by watch events.
    controller, stop = loops(client)
    create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
    st = wait_phase(cluster, "move", "DeletingOldPod")
    assert st["evictedUID"] == "u-old" and cluster.get("pods", "old", NS) is None
    assert cluster.count("create", EVICTIONS) == 1
    assert cluster.count("list", PLACEMENT_LISTS) == 1, "listed once, then watched"

    # Restart: a new controller (new informers) takes over from the status alone.
    stop.set()
    time.sleep(0.6)
    restarted, _ = loops(client)
    time.sleep(0.3)
    assert cluster.count("create", EVICTIONS) == 1, "never evicted twice"
    assert admit_replacement(cluster, make_pinner(client, placements=restarted.placements), "infer-new")
    st = cluster.get("hamipodplacements", "move", NS)["status"]
    assert st["claimedBy"]
    deadline = time.monotonic() + 5
    while status_of(cluster, "move").get("assignmentDetails") is None and time.monotonic() < deadline:
        time.sleep(0.05)
    bind(cluster, "infer-new", "n1", "GPU-n1-1")
    st = wait_phase(cluster, "move", "Completed")
    assert st["assignmentDetails"] == [{"podName": "infer-new", "gpuDevice": "GPU-n1-1"}]
    assert controller.placements.reflector.stats.lists == 1 and restarted.placements.reflector.stats.lists == 1


def test_conditions_follow_the_move_in_the_crd_shape(cluster, client):
    create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
    c = Controller(client, fast())
    c.reconcile_all()
    assert conditions(status_of(cluster, "move"))["Validated"]["status"] == "True"
    c.reconcile_all()
    admit_replacement(cluster, make_pinner(client), "infer-x")
    c.reconcile_all()
    bind(cluster, "infer-x", "n1", "GPU-n1-1")
    c.reconcile_all()
    st = status_of(cluster, "move")
    assert st["phase"] == "Completed"
    got = conditions(st)
    assert {t: (c["status"], c["reason"]) for t, c in got.items()} == {
        "Validated": ("True", "TargetValid"),
        "EvictionRequested": ("True", "Evicted"),
        "Claimed": ("True", "PodAdmitted"),
        "ReplacementCreated": ("True", "PodCreated"),
        "Scheduled": ("True", "BoundOnTarget"),
    }
    item = crd_status_schema()["properties"]["conditions"]["items"]
    for cond in got.values():
        assert set(cond) <= set(item["properties"]) and set(item["required"]) <= set(cond)
        assert cond["status"] in item["properties"]["status"]["enum"]
        datetime.fromisoformat(cond["lastTransitionTime"].replace("Z", "+00:00"))
        assert cond["observedGeneration"] == 1 and cond["message"]
    assert st["observedGeneration"] == 1


def test_condition_transition_time_moves_only_when_its_status_flips():
    st: dict = {}
    s.set_condition(st, 1, (s.EVICTION, False, "DisruptionBudget", "retry 1"))
    first = st["conditions"][0]["lastTransitionTime"]
    st["conditions"][0]["lastTransitionTime"] = "2000-01-01T00:00:00Z"
    s.set_condition(st, 1, (s.EVICTION, False, "DisruptionBudget", "retry 2"))
    assert st["conditions"][0]["lastTransitionTime"] == "2000-01-01T00:00:00Z" and first
    s.set_condition(st, 2, (s.EVICTION, True, "Evicted", "accepted"))
    [cond] = st["conditions"]
    assert cond["lastTransitionTime"] != "2000-01-01T00:00:00Z"
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == ("True", "Evicted", 2)


def test_adding_evict_pod_after_validation_is_validated_before_any_eviction(cluster, client):
    """The guide's workflow: create without evictPod, check, then add evictPod (a spec change)."""
    create_placement(cluster, placement("p", "n1", ["gpu-1"]))
    c = Controller(client, fast())
    c.reconcile_all()
    assert status_of(cluster, "p")["observedGeneration"] == 1
    cluster.custom.patch_namespaced_custom_object(k.GROUP, k.VERSION, NS, k.PLURAL, "p", {"spec": {"evictPod": "busy"}})
    pinner = make_pinner(client)
    assert cluster.get("hamipodplacements", "p", NS)["metadata"]["generation"] == 2
    assert patched(replacement(), pinner.admit(admission(replacement()))) is None, "not pinned before re-validation"
    c.reconcile_all()
    st = status_of(cluster, "p")
    assert st["phase"] == "Failed" and st["message"].startswith("spec.evictPod: pod serving/busy does not match")
    assert_nothing_evicted(cluster)
    assert cluster.get("pods", "busy", NS) is not None


def test_a_changed_target_is_resolved_again_before_pinning(cluster, client):
    create_placement(cluster, placement("p", "n1", ["gpu-1"]))
    c = Controller(client, fast())
    c.reconcile_all()
    assert status_of(cluster, "p")["resolvedUUIDs"] == ["GPU-n1-1"]
    body = {"spec": {"nodeName": "n2", "gpuDevices": ["gpu-0"]}}
    cluster.custom.patch_namespaced_custom_object(k.GROUP, k.VERSION, NS, k.PLURAL, "p", body)
    c.reconcile_all()
    st = status_of(cluster, "p")
    assert (st["phase"], st["resolvedUUIDs"], st["observedGeneration"]) == ("Pending", ["GPU-n2-0"], 2)
    new = patched(replacement(), make_pinner(client).admit(admission(replacement())))
    assert new["metadata"]["annotations"]["nvidia.com/use-gpuuuid"] == "GPU-n2-0"


# -- every phase the CRD declares ----------------------------------------------------------------


def reach_pending(kubeapi, client) -> str:
    create_placement(kubeapi, placement("p", "n1", ["gpu-1"]))
    Controller(client, fast()).reconcile_all()
    return "p"


def reach_deleting(kubeapi, client) -> str:
    create_placement(kubeapi, placement("p", "n1", ["gpu-1"], evict="old"))
    c = Controller(client, fast())
    c.reconcile_all()
    c.reconcile_all()
    return "p"


def reach_completed(kubeapi, client) -> str:
    reach_deleting(kubeapi, client)
    admit_replacement(kubeapi, make_pinner(client), "infer-c")
    bind(kubeapi, "infer-c", "n1", "GPU-n1-1")
    Controller(client, fast()).reconcile_all()
    return "p"


def reach_partially_completed(kubeapi, client) -> str:
    """A two-GPU target; the pinned pod asks for one GPU, HAMi picks one of the whitelist."""
    create_placement(kubeapi, placement("p", "n1", ["gpu-0", "gpu-1"]))
    c = Controller(client, fast())
    c.reconcile_all()
    new = admit_replacement(kubeapi, make_pinner(client), "infer-p")
    assert new["metadata"]["annotations"]["nvidia.com/use-gpuuuid"] == "GPU-n1-0,GPU-n1-1"
    bind(kubeapi, "infer-p", "n1", "GPU-n1-1")
    c.reconcile_all()
    st = status_of(kubeapi, "p")
    assert st["assignmentDetails"] == [{"podName": "infer-p", "gpuDevice": "GPU-n1-1"}]
    assert conditions(st)["Scheduled"]["reason"] == "PartialAssignment" and "GPU-n1-0" in st["message"]
    return "p"


def reach_failed(kubeapi, client) -> str:
    create_placement(kubeapi, placement("p", "n1", ["gpu-9"], evict="old"))
    Controller(client, fast()).reconcile_all()
    return "p"


REACH = {
    "Pending": reach_pending,
    "DeletingOldPod": reach_deleting,
    "PartiallyCompleted": reach_partially_completed,
    "Completed": reach_completed,
    "Failed": reach_failed,
}


def test_the_phases_tested_are_the_crds():
    assert list(REACH) == crd_status_schema()["properties"]["phase"]["enum"]


@pytest.mark.parametrize("phase", list(REACH))
def test_every_phase_is_reachable(cluster, client, phase):
    name = REACH[phase](cluster, client)
    assert status_of(cluster, name)["phase"] == phase


# -- TTL -----------------------------------------------------------------------------------------


def test_ttl_expires_a_placement_no_pod_consumed(cluster, client):
    old_placement(cluster, "stale", ["gpu-1"])
    pinner = make_pinner(client)
    c = Controller(client, fast())  # default TTL: 1h
    c.reconcile_all()  # validated (Pending)...
    sees(pinner, "stale", "Pending")
    # ...but past its TTL the webhook no longer pins it, even before the controller marks it.
    assert patched(replacement(), pinner.admit(admission(replacement()))) is None
    assert status_of(cluster, "stale")["phase"] == "Pending" and not status_of(cluster, "stale").get("claimedBy")
    c.reconcile_all()
    st = status_of(cluster, "stale")
    assert st["phase"] == "Failed" and "placement TTL (3600s, --placement-ttl)" in st["message"]
    assert "no matching pod was created" in st["message"]
    assert (conditions(st)["Claimed"]["status"], conditions(st)["Claimed"]["reason"]) == ("False", "Expired")
    reasons = [e["reason"] for e in cluster.events(NS) if e["object"].startswith("HamiPodPlacement/")]
    assert reasons[-1] == "Expired"


def test_ttl_expiry_never_evicts(cluster, client):
    old_placement(cluster, "stale", ["gpu-1"], evict="old")
    c = Controller(client, fast())
    for _ in range(3):
        c.reconcile_all()
    st = status_of(cluster, "stale")
    assert st["phase"] == "Failed" and "evictPod old was not evicted" in st["message"]
    assert cluster.count("create", EVICTIONS) == 0 and cluster.get("pods", "old", NS) is not None


def test_ttl_is_a_flag_and_zero_means_never(cluster, client):
    old_placement(cluster, "young", ["gpu-1"], hours=0.5)
    old_placement(cluster, "ancient", ["gpu-0"], hours=1000)
    c = Controller(client, Timeouts(ttl=0))
    c.reconcile_all()
    c.reconcile_all()
    assert status_of(cluster, "ancient")["phase"] == "Pending" and status_of(cluster, "young")["phase"] == "Pending"
    new = patched(replacement(), make_pinner(client, ttl=0).admit(admission(replacement())))
    assert new is not None and new["metadata"]["annotations"][k.STAMP_NAME] == f"{NS}/ancient"
    c = Controller(client, Timeouts(ttl=900))  # --placement-ttl 15m
    c.reconcile_all()
    assert status_of(cluster, "young")["phase"] == "Failed" and "900s" in status_of(cluster, "young")["message"]
    assert status_of(cluster, "ancient")["phase"] == "Pending", "claimed: the TTL no longer applies"


def test_claimed_placement_whose_pod_never_arrives_fails(cluster, client):
    create_placement(cluster, placement("pin", "n1", ["gpu-1"]))
    c = Controller(client, Timeouts(replacement=0.5))
    c.reconcile_all()
    # Admitted (claimed) but the pod creation was then rejected by a later webhook: no pod exists.
    assert patched(replacement(), make_pinner(client).admit(admission(replacement()))) is not None
    time.sleep(1.2)
    c.reconcile_all()
    st = status_of(cluster, "pin")
    assert st["phase"] == "Failed" and "no pinned pod appeared" in st["message"]
    assert conditions(st)["ReplacementCreated"]["reason"] == "ReplacementTimeout"


def unpinned_replacement(kubeapi, name: str) -> None:
    """The evicted pod's replacement, created while the pinning webhook could not pin it, in a
    later second than the eviction (timestamps are whole seconds)."""
    time.sleep(1.05 - time.time() % 1)
    pod = replacement()
    pod["metadata"].pop("generateName")
    pod["metadata"]["name"] = name
    kubeapi.create(pod)


@pytest.mark.parametrize(
    ("gpu", "phase", "reason"), [("GPU-n1-1", "Completed", "BoundOnTarget"), ("GPU-n1-0", "Failed", "WrongTarget")]
)
def test_a_replacement_admitted_without_the_pin_decides_the_move_when_it_binds(cluster, client, gpu, phase, reason):
    """No pinned pod will come once the workload's replacement exists unpinned: the move is judged
    on where that pod lands instead of waiting out the replacement timeout."""
    reach_deleting(cluster, client)
    unpinned_replacement(cluster, "infer-u")
    c = Controller(client, fast())
    c.reconcile_all()
    st = status_of(cluster, "p")
    assert st["phase"] == "DeletingOldPod" and "admitted without the pin" in st["message"], st
    assert conditions(st)["ReplacementCreated"]["reason"] == "CreatedWithoutPin"
    bind(cluster, "infer-u", "n1", gpu)
    c.reconcile_all()
    st = status_of(cluster, "p")
    assert st["phase"] == phase and conditions(st)["Scheduled"]["reason"] == reason, st
    assert conditions(st)["ReplacementCreated"]["reason"] == "CreatedWithoutPin"


def test_the_evicting_controller_knows_a_replacement_created_in_the_evictions_second(cluster, client):
    """Creation times are whole seconds and the replacement usually comes in the eviction's own
    second: the controller that evicted remembers the workload's pods before, so a new one is the
    replacement, and an older one in that second (below) is not."""
    create_placement(cluster, placement("p", "n1", ["gpu-1"], evict="old"))
    c = Controller(client, fast())
    c.reconcile_all()
    c.reconcile_all()
    assert status_of(cluster, "p")["phase"] == "DeletingOldPod"
    pod = replacement()
    pod["metadata"].pop("generateName")
    pod["metadata"]["name"] = "infer-now"
    cluster.create(pod)
    bind(cluster, "infer-now", "n1", "GPU-n1-1")
    c.reconcile_all()
    st = status_of(cluster, "p")
    assert st["phase"] == "Completed" and conditions(st)["ReplacementCreated"]["reason"] == "CreatedWithoutPin", st


@pytest.mark.parametrize("claimed_phase", ["Pending", "Completed"])
def test_an_eviction_record_survives_the_webhook_claiming_the_placement_meanwhile(cluster, client, claimed_phase):
    """The eviction lets the ReplicaSet's replacement in at once, and the webhook's claim may reach
    the placement before the controller's write of the eviction: the write meets a newer version.
    The eviction is recorded all the same, on the claimed placement (its phase kept where the move
    went on meanwhile)."""
    from hami_fast.descheduler.writer import StatusWriter

    create_placement(cluster, placement("p", "n1", ["gpu-1"], evict="old"))
    stale = Placement(k.get_placement(client, NS, "p"))
    claim = {"claimedBy": {"podName": "infer-new"}, "consumedAt": "2026-12-03T00:00:00Z", "phase": claimed_phase}
    cluster.update(
        "hamipodplacements.scheduling.hami.placement.com",
        "p",
        lambda cur: cur.setdefault("status", {}).update(claim),
        NS,
    )
    update = StatusUpdate(phase=s.DELETING, message="evicted", evicted_at="2026-12-03T00:00:01Z", evicted_uid="u-old")
    writer = StatusWriter(client, ObjectStore("HamiPodPlacement"))
    assert writer.write(stale, update, (s.EVICTION, True, s.EVICTED, "accepted")) is None, "the stale write conflicts"
    written = writer.record(stale, update, (s.EVICTION, True, s.EVICTED, "accepted"))
    st = status_of(cluster, "p")
    assert written is not None and st["evictedAt"] == "2026-12-03T00:00:01Z" and st["evictedUID"] == "u-old", st
    assert st["claimedBy"] == {"podName": "infer-new"}, "the claim is kept"
    assert st["phase"] == ("DeletingOldPod" if claimed_phase == "Pending" else "Completed"), st
    assert conditions(st)["EvictionRequested"]["status"] == "True", st


def test_an_eviction_whose_answer_was_lost_still_finds_its_unpinned_replacement(cluster, client):
    """The eviction is made but its answer lost (the API server going down): the next pass finds the
    pod already gone and stamps `evictedAt` later than the replacement's creation; the workload's
    pods seen before the call still tell the replacement apart."""
    create_placement(cluster, placement("p", "n1", ["gpu-1"], evict="old"))
    c = Controller(client, fast())
    c.reconcile_all()
    cluster.fail("POST", EVICTIONS, 500, after=True)
    c.reconcile_all()
    pod = replacement()
    pod["metadata"].pop("generateName")
    pod["metadata"]["name"] = "infer-lost"
    cluster.create(pod)
    time.sleep(1.05 - time.time() % 1)  # the pass that finds the pod gone is a second later
    c.reconcile_all()
    assert status_of(cluster, "p")["phase"] == "DeletingOldPod"
    bind(cluster, "infer-lost", "n1", "GPU-n1-1")
    c.reconcile_all()
    st = status_of(cluster, "p")
    assert st["phase"] == "Completed" and conditions(st)["ReplacementCreated"]["reason"] == "CreatedWithoutPin", st


def test_a_pod_of_the_workload_created_before_the_eviction_is_not_its_replacement(cluster, client):
    cluster.create(pod("infer-before", "n1", 1, 4000))
    reach_deleting(cluster, client)
    Controller(client, fast()).reconcile_all()
    st = status_of(cluster, "p")
    assert st["phase"] == "DeletingOldPod" and "waiting for the replacement" in st["message"], st


# -- bad input: Failed, a message naming the field, nothing evicted ---------------------------------


def test_gpu_that_does_not_exist(cluster, client):
    create_placement(cluster, placement("p", "n1", ["gpu-7"], evict="old"))
    Controller(client, fast()).reconcile_all()
    st = status_of(cluster, "p")
    assert st["phase"] == "Failed" and st["message"].startswith("spec.gpuDevices: ") and "gpu-7" in st["message"]
    assert conditions(st)["Validated"]["reason"] == "InvalidTarget"
    assert_nothing_evicted(cluster)


def test_pod_that_does_not_match(cluster, client):
    create_placement(cluster, placement("p", "n1", ["gpu-1"], evict="busy"))  # busy is app=other
    Controller(client, fast()).reconcile_all()
    st = status_of(cluster, "p")
    assert st["phase"] == "Failed" and st["message"].startswith("spec.evictPod: pod serving/busy")
    assert "does not match spec.podSelector" in st["message"]
    assert conditions(st)["Validated"]["reason"] == "InvalidEvictee"
    assert_nothing_evicted(cluster)


def test_node_that_does_not_exist(cluster, client):
    create_placement(cluster, placement("p", "gone", ["gpu-0"], evict="old"))
    Controller(client, fast()).reconcile_all()
    st = status_of(cluster, "p")
    assert st["phase"] == "Failed" and st["message"].startswith("spec.nodeName: ") and "gone" in st["message"]
    assert_nothing_evicted(cluster)


def test_node_gone_after_validation_is_caught_before_the_eviction(cluster, client):
    create_placement(cluster, placement("p", "n1", ["gpu-1"], evict="old"))
    c = Controller(client, fast())
    c.reconcile_all()
    assert status_of(cluster, "p")["phase"] == "Pending"
    cluster.delete("nodes", "n1")
    c.reconcile_all()
    st = status_of(cluster, "p")
    assert st["phase"] == "Failed" and st["message"].startswith("spec.nodeName: target no longer valid")
    assert "nothing was evicted" in st["message"] and conditions(st)["Validated"]["reason"] == "TargetGone"
    assert_nothing_evicted(cluster)


def test_node_gone_before_admission_pins_nothing(cluster, client):
    create_placement(cluster, placement("p", "n1", ["gpu-1"]))
    Controller(client, fast()).reconcile_all()
    pinner = make_pinner(client)
    sees(pinner, "p", "Pending")
    cluster.delete("nodes", "n1")
    assert patched(replacement(), pinner.admit(admission(replacement()))) is None
    st = status_of(cluster, "p")
    assert st["phase"] == "Failed" and "spec.nodeName: node n1 not found" in st["message"]
    assert_nothing_evicted(cluster)


# -- metrics -------------------------------------------------------------------------------------


def samples(text: bytes) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_count_moves_latency_and_phases(cluster, client):
    c = Controller(client, fast())
    create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
    create_placement(cluster, placement("bad", "n1", ["gpu-9"]))
    old_placement(cluster, "stale", ["gpu-0"])
    create_placement(cluster, placement("waiting", "n2", ["gpu-0"], app="later"))
    c.reconcile_all()
    c.reconcile_all()
    admit_replacement(cluster, make_pinner(client), "infer-m")
    bind(cluster, "infer-m", "n1", "GPU-n1-1")
    c.reconcile_all()
    got = samples(c.metrics.render())
    moves = {
        dict(labels)["result"]: v for (name, labels), v in got.items() if name == "hami_fast_descheduler_moves_total"
    }
    assert moves == {"completed": 1, "rejected": 1, "expired": 1, "failed": 0, "partially_completed": 0}
    assert got[("hami_fast_descheduler_eviction_duration_seconds_count", ())] == 1
    assert got[("hami_fast_descheduler_move_duration_seconds_count", ())] == 1
    inf = ("le", "+Inf")
    assert got[("hami_fast_descheduler_eviction_duration_seconds_bucket", (inf,))] == 1
    phases = {
        dict(labels)["phase"]: v for (name, labels), v in got.items() if name == "hami_fast_descheduler_placements"
    }
    assert phases == {"New": 0, "Pending": 1, "DeletingOldPod": 0, "PartiallyCompleted": 0, "Completed": 1, "Failed": 2}


def test_eviction_latency_includes_the_disruption_budget_wait(cluster, client):
    cluster.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb", "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "infer"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
    c = Controller(client, fast())
    c.reconcile_all()
    c.reconcile_all()  # refused (429)
    assert conditions(status_of(cluster, "move"))["EvictionRequested"]["reason"] == "DisruptionBudget"
    time.sleep(0.4)
    cluster.patch("poddisruptionbudgets", "pdb", {"status": {"disruptionsAllowed": 1}}, NS)
    c.reconcile_all()
    st = status_of(cluster, "move")
    assert st["phase"] == "DeletingOldPod" and conditions(st)["EvictionRequested"]["status"] == "True"
    got = samples(c.metrics.render())
    assert got[("hami_fast_descheduler_eviction_duration_seconds_count", ())] == 1
    assert got[("hami_fast_descheduler_eviction_duration_seconds_sum", ())] >= 0.4


def test_placement_gauge_reads_the_cache():
    store = ObjectStore("HamiPodPlacement")
    for i, phase in enumerate(["Pending", "Pending", None, "Weird"]):
        obj = {"metadata": {"name": f"p{i}", "namespace": NS, "resourceVersion": str(i)}}
        if phase:
            obj["status"] = {"phase": phase}
        store.put(obj)
    got = samples(DeschedulerMetrics(store).render())
    assert got[("hami_fast_descheduler_placements", (("phase", "Pending"),))] == 2
    assert got[("hami_fast_descheduler_placements", (("phase", "New"),))] == 1
    assert got[("hami_fast_descheduler_placements", (("phase", "Weird"),))] == 1


def test_hold_gauges_count_the_live_holds_of_the_cached_pods():
    from descheduler_world import pod
    from hami_fast.descheduler.cache import trim_pod

    def owner(name: str, hold: str, expires: str, **changes) -> dict:
        p = pod(name, None)
        p["metadata"]["annotations"] = {"hami-fast.io/reservation": hold, "hami-fast.io/reservation-expires": expires}
        p["metadata"]["resourceVersion"] = "1"
        p["spec"].update(changes)
        return p

    later, earlier = "2999-01-01T00:00:00Z", "2001-01-01T00:00:00Z"
    pods = ObjectStore("Pod", trim=trim_pod)
    for p in (
        owner("big", "n1/GPU-n1-0,GPU-n1-1", later),
        owner("small", "n2/GPU-n2-0", later),
        owner("lapsed", "n2/GPU-n2-1", earlier),
        owner("rival", "n2/GPU-n2-0", later),  # the GPU is held for small already
        owner("broken", "no-slash", later),
        owner("bound", "n2/GPU-n2-1", later, nodeName="n2"),
        pod("plain", "n1"),
    ):
        pods.put(p)
    got = samples(DeschedulerMetrics(ObjectStore("HamiPodPlacement"), pods).render())
    assert got[("hami_fast_descheduler_reservations", ())] == 2
    assert got[("hami_fast_descheduler_reserved_gpus", ())] == 3
    empty = samples(DeschedulerMetrics(None, ObjectStore("Pod", trim=trim_pod)).render())
    assert empty[("hami_fast_descheduler_reservations", ())] == 0


def test_metrics_endpoint_serves_prometheus_text(cluster):
    import argparse
    import asyncio
    import urllib.request

    from hami_fast.descheduler.cli import Runtime, add_arguments
    from hami_fast.descheduler.config import load

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    port = free_port()
    runtime = Runtime(
        load(parser.parse_args(["--bind", f"127.0.0.1:{port}", "--kubeconfig", cluster.kubeconfig]), environ={})
    )
    runtime.start()
    ready = threading.Event()
    thread = threading.Thread(target=lambda: asyncio.run(runtime.serve(ready)), daemon=True)
    thread.start()
    try:
        assert ready.wait(10)
        create_placement(cluster, placement("bad", "n1", ["gpu-9"]))
        wait_phase(cluster, "bad", "Failed")
        deadline = time.monotonic() + 5
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                content_type, body = r.headers["content-type"], r.read()
            got = samples(body)
            if (
                got.get(("hami_fast_descheduler_placements", (("phase", "Failed"),))) == 1
                or time.monotonic() > deadline
            ):
                break
            time.sleep(0.1)
        assert content_type.startswith("text/plain; version=0.0.4")
        assert got[("hami_fast_descheduler_moves_total", (("result", "rejected"),))] == 1
        assert got[("hami_fast_descheduler_placements", (("phase", "Failed"),))] == 1
    finally:
        runtime.stop.set()
        thread.join(10)


# -- the work queue ------------------------------------------------------------------------------


def test_work_queue_dedupes_and_delays():
    q = WorkQueue()
    q.add("a")
    q.add("a")
    q.add_after("b", 0.2)
    q.add_after("b", 0.1)  # the earlier deadline wins
    q.add_after("b", 5.0)  # a later one does not push it back
    assert q.get(0.01) == "a" and q.get(0.01) is None
    start = time.monotonic()
    assert q.get(1.0) == "b"
    assert 0.08 <= time.monotonic() - start < 0.5
    assert q.get(0.2) is None, "one wake-up per key"


def test_object_store_follows_the_reflector_contract():
    import orjson

    heard: list[tuple[str, str | None, str | None]] = []
    store = ObjectStore("HamiPodPlacement")
    phase = lambda o: ((o or {}).get("status") or {}).get("phase")  # noqa: E731
    store.listeners.append(lambda key, old, new: heard.append((key, phase(old), phase(new))))

    def obj(name: str, rv: str, ph: str) -> dict:
        return {"metadata": {"name": name, "namespace": NS, "resourceVersion": rv}, "status": {"phase": ph}}

    page = {"metadata": {"resourceVersion": "5", "continue": "tok"}, "items": [obj("a", "3", "Pending"), {}]}
    version, token, keys, errors = store.apply_list_page(orjson.dumps(page))
    assert (version, token, keys) == ("5", "tok", [f"{NS}/a"]) and len(errors) == 1
    event = orjson.dumps({"type": "MODIFIED", "object": obj("a", "7", "DeletingOldPod")})
    assert store.apply_watch_event(event) == ("MODIFIED", "7", f"{NS}/a", 0, None)
    store.put(obj("a", "6", "Pending"))  # a write's answer older than what the watch brought: kept out
    assert phase(store.get(f"{NS}/a")) == "DeletingOldPod"
    assert store.apply_watch_event(orjson.dumps({"type": "MODIFIED", "object": obj("a", "7", "x")}))[2] == f"{NS}/a"
    assert phase(store.get(f"{NS}/a")) == "DeletingOldPod", "same resourceVersion: no change, no event"
    bookmark = orjson.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}})
    assert store.apply_watch_event(bookmark) == ("BOOKMARK", "9", "", 0, None)
    gone = orjson.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}})
    assert store.apply_watch_event(gone)[0::3] == ("ERROR", 410)
    with pytest.raises(ValueError):
        store.apply_watch_event(b"{not json")
    assert store.retain("HamiPodPlacement", []) == 1 and len(store) == 0
    assert heard == [
        (f"{NS}/a", None, "Pending"),
        (f"{NS}/a", "Pending", "DeletingOldPod"),
        (f"{NS}/a", "DeletingOldPod", None),
    ]


@pytest.mark.parametrize(
    ("old", "new", "allowed"),
    [
        (None, s.PENDING, True),
        (None, s.FAILED, True),
        (None, s.DELETING, False),
        (s.PENDING, s.PENDING, True),
        (s.PENDING, s.DELETING, True),
        (s.PENDING, s.COMPLETED, True),
        (s.DELETING, s.COMPLETED, True),
        (s.DELETING, s.PENDING, False),
        (s.COMPLETED, s.FAILED, False),
        (s.FAILED, s.FAILED, False),
        (s.PARTIAL, s.PENDING, False),
    ],
)
def test_phases_change_only_as_the_state_machine_allows(old, new, allowed):
    placement = Placement({"metadata": {"namespace": "ns", "name": "pl"}, "status": {"phase": old} if old else {}})
    if allowed:
        placement.check_transition(new)
    else:
        with pytest.raises(s.IllegalTransition) as refused:
            placement.check_transition(new)
        assert str(refused.value) == f"placement ns/pl: phase {old or '(none)'} cannot become {new}"


def test_a_write_the_state_machine_refuses_reaches_no_api(cluster, client):
    controller = Controller(client)
    done = {"metadata": {"namespace": "ns", "name": "pl", "uid": "u"}, "status": {"phase": s.COMPLETED}}
    cluster.clear_log()
    assert controller.writer.write(Placement(done), StatusUpdate(phase=s.FAILED, message="late failure")) is None
    assert cluster.requests() == [] and done["status"] == {"phase": s.COMPLETED}


def test_the_devices_a_bound_pod_got_are_read_by_the_engines_codec_from_every_backends_list():
    from hami_fast.descheduler.evictee import allocated_devices

    annotations = {
        "hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,4000,30:GPU-b,NVIDIA,4000,30:;GPU-c,NVIDIA,1,1:;",
        "hami.io/dcu-devices-allocated": "DCU-0,DCU,4000,30:;",
        "hami.io/vgpu-devices-to-allocate": "GPU-z,NVIDIA,1,1:;",  # not an allocation list
    }
    assert allocated_devices(annotations) == {"GPU-a", "GPU-b", "GPU-c", "DCU-0"}
    assert allocated_devices({"hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,lots,30:;"}) == set()

"""Binds to a node whose lock is held wait in the node's queue (arrival order) instead of failing back to
kube-scheduler; the lock's values and writes stay HAMi's. Against the test API server, over real HTTP."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from hami_fast.kube.nodelock import LockContention
from hami_fast.server.bindqueue import BindJob, BindQueue
from hami_fast.server.scheduler import is_pod_group_member
from k8s_objects import bind_args, filter_args, gpu_node, gpu_pod
from kubeapi.fixtures import wait_for
from serving import Service, serve

LOCK = "hami.io/mutex.lock"
LOCK_VALUE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d),(?P<ns>[^,]+),(?P<name>[^,]+)$")
CONTENTION = "node node-0 has been locked within 5m0s: node lock contention"


@pytest.fixture
def cluster(kubeapi):
    kubeapi.create(gpu_node("node-0"))
    return kubeapi


def filtered(svc: Service, *pods: dict) -> None:
    """Filter each pod onto node-0, as kube-scheduler does before it asks for the Bind."""
    for pod in pods:
        assert svc.post("/filter", filter_args(pod, ["node-0"]))["NodeNames"] == ["node-0"]


def lock_owner(cluster) -> str | None:
    value = (cluster.get("nodes", "node-0")["metadata"].get("annotations") or {}).get(LOCK)
    return LOCK_VALUE.match(value).group("name") if value else None


def allocate(cluster, name: str) -> None:
    """What HAMi's device plugin does after Allocate: mark the pod and release the node lock."""
    cluster.patch("pods", name, {"metadata": {"annotations": {"hami.io/bind-phase": "success"}}}, "default")
    cluster.patch("nodes", "node-0", {"metadata": {"annotations": {LOCK: None}}})


def binding_failures(cluster) -> list[dict]:
    return [e for e in cluster.events("default") if e["reason"] == "BindingFailed"]


def test_a_contended_bind_completes_once_the_lock_is_released(cluster) -> None:
    first, second = cluster.create(gpu_pod("a", gpu=1, mem=100)), cluster.create(gpu_pod("b", gpu=1, mem=100))
    with serve(cluster) as svc, ThreadPoolExecutor(1) as pool:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        filtered(svc, first, second)
        assert svc.post("/bind", bind_args(first, "node-0")) == {"Error": ""}
        waiting = pool.submit(svc.post, "/bind", bind_args(second, "node-0"))
        time.sleep(1.0)
        assert not waiting.done(), "a bind on a held lock must wait, not fail back to kube-scheduler"
        assert cluster.get("pods", "b", "default")["spec"].get("nodeName") is None
        assert lock_owner(cluster) == "a"
        released = time.monotonic()
        allocate(cluster, "a")
        assert waiting.result(10) == {"Error": ""}
        # Woken by the node watch, not by the 2 s fallback recheck.
        assert time.monotonic() - released < 1.5
        assert cluster.get("pods", "b", "default")["spec"]["nodeName"] == "node-0"
        assert lock_owner(cluster) == "b"
        assert binding_failures(cluster) == []


def test_waiting_binds_complete_in_arrival_order(cluster) -> None:
    names = [f"p{i}" for i in range(6)]
    pods = [cluster.create(gpu_pod(n, gpu=1, mem=100)) for n in names]
    with serve(cluster, kube_qps=1000, kube_burst=1000) as svc, ThreadPoolExecutor(len(pods)) as pool:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        filtered(svc, *pods)
        answers = []
        for pod in pods:  # one at a time, so arrival order is known
            answers.append(pool.submit(svc.post, "/bind", bind_args(pod, "node-0")))
            wait_for(lambda: svc.runtime.scheduler.binds.depth() + sum(a.done() for a in answers) == len(answers), 5)
        owners = []
        for i in range(len(names)):
            owner = wait_for(lambda: lock_owner(cluster), 10, f"lock holder #{i}")
            owners.append(owner)
            allocate(cluster, owner)
            wait_for(lambda owner=owner: lock_owner(cluster) != owner, 10, f"{owner}'s lock released")
        assert owners == names
        assert [a.result(10) for a in answers] == [{"Error": ""}] * len(names)
        assert binding_failures(cluster) == []


def test_a_bind_still_waiting_at_its_deadline_fails_with_hamis_error(cluster) -> None:
    first, second = cluster.create(gpu_pod("a", gpu=1, mem=100)), cluster.create(gpu_pod("b", gpu=1, mem=100))
    with serve(cluster, bind_wait_timeout=1.5) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        filtered(svc, first, second)
        assert svc.post("/bind", bind_args(first, "node-0")) == {"Error": ""}
        started = time.monotonic()
        assert svc.post("/bind", bind_args(second, "node-0")) == {"Error": CONTENTION}
        assert 1.4 <= time.monotonic() - started < 5
        assert cluster.get("pods", "b", "default")["spec"].get("nodeName") is None
        assert lock_owner(cluster) == "a"
        [failed] = wait_for(lambda: binding_failures(cluster), 5, "BindingFailed")
        assert failed["message"] == CONTENTION
        # The queue moved on: the next bind after the release is not stuck behind the failed one.
        allocate(cluster, "a")
        assert svc.post("/bind", bind_args(second, "node-0")) == {"Error": ""}


def test_zero_wait_keeps_hamis_fail_fast(cluster) -> None:
    first, second = cluster.create(gpu_pod("a", gpu=1, mem=100)), cluster.create(gpu_pod("b", gpu=1, mem=100))
    with serve(cluster, bind_wait_timeout=0) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        filtered(svc, first, second)
        assert svc.post("/bind", bind_args(first, "node-0")) == {"Error": ""}
        started = time.monotonic()
        assert svc.post("/bind", bind_args(second, "node-0")) == {"Error": CONTENTION}
        assert time.monotonic() - started < 1


@pytest.mark.parametrize("how", ["label", "schedulingGroup"])
def test_a_pod_group_member_waits_at_least_the_lock_retry_budget(cluster, how) -> None:
    """HAMi's IsPodGroupMember: the coscheduling label, or spec.schedulingGroup.podGroupName."""
    first = cluster.create(gpu_pod("a", gpu=1, mem=100))
    member = gpu_pod("m", gpu=1, mem=100)
    if how == "label":
        member["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "g"}
    else:
        member["spec"]["schedulingGroup"] = {"podGroupName": "g"}
    member = cluster.create(member)
    with serve(cluster, bind_wait_timeout=0.2, node_lock_retry_timeout=1.5) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        filtered(svc, first, member)
        assert svc.post("/bind", bind_args(first, "node-0")) == {"Error": ""}
        started = time.monotonic()
        assert svc.post("/bind", bind_args(member, "node-0")) == {"Error": CONTENTION}
        assert time.monotonic() - started >= 1.4


def test_many_pods_onto_one_node_bind_back_to_back_with_a_device_plugin(cluster) -> None:
    """20 binds at once onto one node; a device plugin stand-in allocates each after 0.1 s. None fails,
    and the whole run is close to the serial floor (20 x 0.1 s) rather than kube-scheduler's backoff."""
    pods = [cluster.create(gpu_pod(f"q{i}", gpu=1, mem=100)) for i in range(20)]
    stop = threading.Event()

    def device_plugin() -> None:
        while not stop.is_set():
            owner = lock_owner(cluster)
            if owner:
                time.sleep(0.1)
                allocate(cluster, owner)
            else:
                time.sleep(0.01)

    plugin = threading.Thread(target=device_plugin, daemon=True)
    with serve(cluster, kube_qps=1000, kube_burst=1000) as svc, ThreadPoolExecutor(len(pods)) as pool:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        filtered(svc, *pods)
        plugin.start()
        started = time.monotonic()
        answers = list(pool.map(lambda p: svc.post("/bind", bind_args(p, "node-0")), pods))
        elapsed = time.monotonic() - started
        stop.set()
        assert answers == [{"Error": ""}] * len(pods)
        assert all(cluster.get("pods", p["metadata"]["name"], "default")["spec"]["nodeName"] == "node-0" for p in pods)
        assert binding_failures(cluster) == []
        assert elapsed < 20 * 0.1 * 4, elapsed  # generous: the point is no 1 s+ backoff per contention


def test_a_node_change_during_an_attempt_is_not_lost() -> None:
    """The lock is released between the head's read and its parking: the watch event must re-run it now,
    not after the fallback recheck."""
    released = threading.Event()
    tries: list[float] = []

    def attempt() -> bytes:
        tries.append(time.monotonic())
        if len(tries) == 1:
            queue.node_changed("n")  # the watch event arrives while this attempt still sees the old lock
            raise LockContention("held")
        released.set()
        return b"ok"

    queue = BindQueue(workers=2, recheck_interval=30)
    try:
        future = queue.submit(BindJob.within("n", attempt, lambda exc: b"gave up", wait=10))
        assert future.result(5) == b"ok"
        assert tries[1] - tries[0] < 1
    finally:
        queue.stop()


def test_a_parked_bind_gives_up_at_its_deadline_without_a_wake_up() -> None:
    queue = BindQueue(workers=1, recheck_interval=30)
    try:
        started = time.monotonic()

        def attempt() -> bytes:
            raise LockContention("held")

        future = queue.submit(BindJob.within("n", attempt, lambda exc: f"gave up: {exc}".encode(), wait=0.5))
        assert future.result(5) == b"gave up: held"
        assert 0.45 <= time.monotonic() - started < 2
        assert queue.depth() == 0
    finally:
        queue.stop()


def test_a_bind_that_never_gets_a_worker_is_answered_at_its_deadline() -> None:
    """A saturated API client must not hold an answer past kube-scheduler's httpTimeout: the bind
    is answered shortly after its deadline and never attempted later (no late binding)."""
    queue = BindQueue(workers=1, recheck_interval=30, grace=0.3)
    release = threading.Event()
    ran: list[str] = []

    def slow() -> bytes:
        ran.append("slow")
        release.wait(10)
        return b"slow done"

    def late() -> bytes:
        ran.append("late")
        return b"late done"

    try:
        blocker = queue.submit(BindJob.within("a", slow, lambda exc: b"gave up", wait=10))
        started = time.monotonic()
        waiting = queue.submit(BindJob.within("b", late, lambda exc: f"gave up: {exc}".encode(), wait=0.5))
        answer = waiting.result(5)
        assert answer.startswith(b"gave up: node b: bind still queued at its deadline")
        assert 0.7 <= time.monotonic() - started < 2
        release.set()
        assert blocker.result(5) == b"slow done"
        time.sleep(0.3)
        assert ran == ["slow"], "an answered bind must never run afterwards"
        assert queue.depth() == 0
    finally:
        queue.stop()


def test_an_attempt_that_loses_the_race_with_its_deadline_backs_out_before_the_lock() -> None:
    queue = BindQueue(workers=1, recheck_interval=30, grace=0.2)
    locked: list[bool] = []
    job = BindJob.within("n", lambda: b"", lambda exc: b"gave up", wait=0.1)

    def attempt() -> bytes:
        time.sleep(0.6)  # e.g. waiting on the client's rate limiter
        if not queue.commit(job):
            raise LockContention("answered at its deadline")
        locked.append(True)
        return b"bound"

    job.attempt = attempt
    try:
        assert queue.submit(job).result(5) == b"gave up"
        time.sleep(0.7)
        assert locked == []
        assert queue.depth() == 0
    finally:
        queue.stop()


@pytest.mark.parametrize(
    ("pod", "member"),
    [
        ({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "g"}}}, True),
        ({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": ""}}}, False),
        ({"spec": {"schedulingGroup": {"podGroupName": "g"}}}, True),
        ({"spec": {"schedulingGroup": {"podGroupName": ""}}}, False),
        ({"metadata": {"labels": None}, "spec": {"schedulingGroup": None}}, False),
        ({}, False),
    ],
)
def test_pod_group_membership_read_from_a_pod_object_as_hami_reads_it(pod, member) -> None:
    assert is_pod_group_member(pod) is member

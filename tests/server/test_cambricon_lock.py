"""Cambricon's own node lock `cambricon.com/dsmlu.lock` at Bind, against the test API server, as
HAMi v2.10's Cambricon backend takes and releases it (pkg/device/cambricon/device.go: an RFC 3339
time, refused for 2 minutes, an expired one taken over, deleted by every failed Bind whoever holds
it), and beside HAMi's shared lock for a pod asking NVIDIA too (lockAllDevices, byte order)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from k8s_objects import bind_args, filter_args, gpu_node, limits_pod
from kubeapi.fixtures import wait_for
from serving import Service, serve

MLU_LOCK = "cambricon.com/dsmlu.lock"
SHARED_LOCK = "hami.io/mutex.lock"


def mlu_node(name: str) -> dict:
    """A node Cambricon's device plugin registered: 2 MLUs of 100 cores and 64 x 256 MiB each,
    beside two NVIDIA GPUs."""
    node = gpu_node(name)
    capacity = {"cambricon.com/mlu.smlu.vcore": "200", "cambricon.com/mlu.smlu.vmemory": "128"}
    node["status"]["capacity"] = {**node["status"]["allocatable"], **capacity}
    node["status"]["allocatable"].update(capacity)
    return node


def mlu_pod(name: str, nvidia: bool = False) -> dict:
    limits = {"cambricon.com/vmlu": "1", "cambricon.com/mlu.smlu.vmemory": "8"}
    if nvidia:
        limits["nvidia.com/gpu"] = "1"
    return limits_pod(limits, name=name)


def stamp(age: timedelta) -> str:
    return (datetime.now(UTC) - age).strftime("%Y-%m-%dT%H:%M:%SZ")


def annotations(kubeapi, node: str) -> dict:
    return kubeapi.get("nodes", node)["metadata"].get("annotations") or {}


def fresh(value: str) -> bool:
    return abs((datetime.now(UTC) - datetime.fromisoformat(value)).total_seconds()) < 60


def bound(svc: Service, pod: dict, node: str = "node-0") -> str:
    assert svc.post("/filter", filter_args(pod, [node]))["NodeNames"] == [node]
    return svc.post("/bind", bind_args(pod, node))["Error"]


def ready(svc: Service) -> Service:
    wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
    return svc


def test_an_mlu_pod_takes_cambricons_lock_only(kubeapi) -> None:
    kubeapi.create(mlu_node("node-0"))
    pod = kubeapi.create(mlu_pod("m"))
    with serve(kubeapi) as svc:
        ready(svc)
        assert bound(svc, pod) == ""
        held = annotations(kubeapi, "node-0")
        assert fresh(held[MLU_LOCK]), held[MLU_LOCK]
        assert SHARED_LOCK not in held
        allocated = kubeapi.get("pods", "m", "default")["metadata"]["annotations"]
        assert allocated["hami.io/cambricon-mlu-devices-allocated"].startswith("node-0-cambricon-mlu-")
        assert allocated["CAMBRICON_DSMLU_ASSIGNED"] == "false"


def test_a_pod_asking_nvidia_and_mlu_takes_both_locks(kubeapi) -> None:
    kubeapi.create(mlu_node("node-0"))
    pod = kubeapi.create(mlu_pod("both", nvidia=True))
    with serve(kubeapi) as svc:
        ready(svc)
        assert bound(svc, pod) == ""
        held = annotations(kubeapi, "node-0")
        assert fresh(held[MLU_LOCK])
        assert held[SHARED_LOCK].endswith(",default,both")


def test_a_held_lock_refuses_the_bind_and_the_failure_deletes_it(kubeapi) -> None:
    """HAMi refuses while the lock is younger than 2 minutes, then its failed Bind deletes the lock
    whoever took it: the next Bind goes through."""
    kubeapi.create(mlu_node("node-0"))
    other = stamp(timedelta(seconds=30))
    kubeapi.patch("nodes", "node-0", {"metadata": {"annotations": {MLU_LOCK: other}}})
    pod = kubeapi.create(mlu_pod("m"))
    with serve(kubeapi, bind_wait_timeout=0) as svc:
        ready(svc)
        assert bound(svc, pod) == "node node-0 has been locked within 2 minutes"
        assert kubeapi.get("pods", "m", "default")["spec"].get("nodeName") is None
        assert MLU_LOCK not in annotations(kubeapi, "node-0")
        assert svc.post("/bind", bind_args(pod, "node-0"))["Error"] == ""
        assert fresh(annotations(kubeapi, "node-0")[MLU_LOCK])


def test_a_waiting_bind_goes_through_once_the_failure_released_the_lock(kubeapi) -> None:
    """With the bind queue (the default), the refused attempt's release wakes the bind, which then
    takes the lock: the pod is bound in one Bind call."""
    kubeapi.create(mlu_node("node-0"))
    kubeapi.patch("nodes", "node-0", {"metadata": {"annotations": {MLU_LOCK: stamp(timedelta(seconds=5))}}})
    pod = kubeapi.create(mlu_pod("m"))
    with serve(kubeapi) as svc:
        ready(svc)
        assert bound(svc, pod) == ""
        assert kubeapi.get("pods", "m", "default")["spec"]["nodeName"] == "node-0"
        assert fresh(annotations(kubeapi, "node-0")[MLU_LOCK])


def test_an_expired_lock_is_taken_over_and_a_garbled_one_fails_the_bind(kubeapi) -> None:
    kubeapi.create(mlu_node("node-0"))
    kubeapi.create(mlu_node("node-1"))
    kubeapi.patch("nodes", "node-0", {"metadata": {"annotations": {MLU_LOCK: stamp(timedelta(minutes=3))}}})
    kubeapi.patch("nodes", "node-1", {"metadata": {"annotations": {MLU_LOCK: "yesterday"}}})
    first, second = kubeapi.create(mlu_pod("a")), kubeapi.create(mlu_pod("b"))
    with serve(kubeapi, bind_wait_timeout=0) as svc:
        ready(svc)
        assert bound(svc, first) == ""
        assert fresh(annotations(kubeapi, "node-0")[MLU_LOCK])
        error = bound(svc, second, "node-1")
        assert error == "node node-1: annotation cambricon.com/dsmlu.lock 'yesterday' is not an RFC 3339 time"
        assert MLU_LOCK not in annotations(kubeapi, "node-1"), "the failed Bind deletes it, as HAMi's does"


def test_any_failed_bind_deletes_cambricons_lock(kubeapi) -> None:
    """HAMi's releaseAllDevices runs every backend's release on a failed Bind, and Cambricon's
    deletes its lock without asking whose it is: an NVIDIA pod's failed binding does it too."""
    kubeapi.create(mlu_node("node-0"))
    kubeapi.patch("nodes", "node-0", {"metadata": {"annotations": {MLU_LOCK: stamp(timedelta(seconds=10))}}})
    pod = kubeapi.create(mlu_pod("g") | {"spec": {"containers": [gpu_container()]}})
    with serve(kubeapi) as svc:
        ready(svc)
        kubeapi.fail("POST", "/api/v1/namespaces/default/pods/g/binding", 500, times=4)  # every try
        assert "500" in bound(svc, pod)
        held = annotations(kubeapi, "node-0")
        assert MLU_LOCK not in held
        assert SHARED_LOCK not in held, "its own shared lock released too"


def gpu_container() -> dict:
    return {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}

"""hami-fast serve against a test API server that speaks the real Kubernetes REST API, over real HTTP."""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from k8s_objects import bind_args, filter_args, gpu_node, gpu_pod
from kubeapi.fixtures import wait_for
from prometheus_client import generate_latest
from serving import Service, serve

LOCK = "hami.io/mutex.lock"
LOCK_VALUE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d),(?P<ns>[^,]+),(?P<name>[^,]+)$")


def scheduling_patches(cluster, path=None) -> int:
    """PATCH requests other than the registration passes' handshake writes (kube/handshake.py)."""
    return sum("hami.io/node-handshake" not in str(r.json) for r in cluster.requests("PATCH", path))


def device_usage(service: Service) -> dict[str, dict]:
    return {d["uuid"]: d for n in orjson.loads(service.cluster.usage()) for d in n["devices"]}


@pytest.fixture
def cluster(kubeapi):
    for i in range(2):
        kubeapi.create(gpu_node(f"node-{i}"))
    return kubeapi


def settled(svc: Service) -> None:
    """Synced, and the first registration pass done: its handshake writes change every node's
    resourceVersion right after sync, and a lock written before their answers reach NodeLocks
    would meet a real 409 (retried, but it would add a write to the ones a test counts)."""
    wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
    [handshake] = [t for t in svc.runtime.threads if type(t).__name__ == "Handshaker"]
    wait_for(lambda: handshake.passes >= 1, 10, "the first handshake pass")


def filtered(svc: Service, pod: dict, node: str) -> dict:
    """Filter the pod onto `node`, as kube-scheduler does before it asks for the Bind."""
    assert svc.post("/filter", filter_args(pod, [node]))["NodeNames"] == [node]
    return pod


def test_readiness_follows_cache_sync(cluster) -> None:
    with serve(cluster) as svc:
        wait_for(lambda: svc.request("GET", "/readyz")[0] == 200, 10, "readyz")
        assert svc.cluster.node_count() == 2
        assert svc.request("GET", "/healthz")[0] == 200
        assert svc.request("GET", "/filter")[0] == 405
        assert svc.request("GET", "/nope")[0] == 404


def test_filter_answers_then_bind_writes_the_allocation_once_locks_and_binds(cluster) -> None:
    """--allocation-write=bind: Filter answers without a write; Bind takes HAMi's node lock, then
    writes Filter's annotations and bind-phase in one pod patch, then posts the binding."""
    pod = cluster.create(gpu_pod("p1", gpu=1, mem=3000, cores=30))
    with serve(cluster, allocation_write="bind") as svc:
        settled(svc)
        result = svc.post("/filter", filter_args(pod, ["node-0", "node-1", "ghost"]))
        assert result["Error"] == "" and len(result["NodeNames"]) == 1
        node = result["NodeNames"][0]
        assert cluster.requests("PATCH", "/api/v1/namespaces/default/pods/p1") == [], "Filter wrote the pod"
        assert svc.cluster.pod_count() == 1, "the engine holds Filter's reservation"

        assert svc.post("/bind", bind_args(pod, node)) == {"Error": ""}
        [patch] = cluster.requests("PATCH", "/api/v1/namespaces/default/pods/p1")
        assert patch.content_type == "application/merge-patch+json"
        body = patch.json
        assert body["metadata"]["labels"] == {"hami.io/vgpu-node": node}
        annotations = body["metadata"]["annotations"]
        assert annotations["hami.io/vgpu-node"] == node
        assert annotations["hami.io/vgpu-devices-allocated"] == annotations["hami.io/vgpu-devices-to-allocate"]
        assert re.fullmatch(rf"GPU-{node}-\d,NVIDIA,3000,30:;", annotations["hami.io/vgpu-devices-allocated"])
        assert annotations["hami.io/bind-phase"] == "allocating" and annotations["hami.io/bind-time"].isdigit()
        [binding] = cluster.requests("POST", "/api/v1/namespaces/default/pods/p1/binding")
        node_patches = cluster.requests("PATCH", f"/api/v1/nodes/{node}")
        [lock_patch] = [r for r in node_patches if "hami.io/node-handshake" not in str(r.json)]
        assert lock_patch.json["metadata"]["resourceVersion"]
        assert lock_patch.time <= patch.time <= binding.time, "lock, then the annotations, then the binding"
        lock = cluster.get("nodes", node)["metadata"]["annotations"][LOCK]
        assert LOCK_VALUE.match(lock).group("ns", "name") == ("default", "p1")
        stored = cluster.get("pods", "p1", "default")
        assert stored["spec"]["nodeName"] == node
        assert stored["metadata"]["annotations"]["hami.io/bind-phase"] == "allocating"
        assert (
            stored["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"]
            == (annotations["hami.io/vgpu-devices-allocated"])
        )
        reasons = wait_for(
            lambda: (
                {e["reason"] for e in cluster.events("default")} >= {"FilteringSucceed", "BindingSucceed"}
                and {e["reason"] for e in cluster.events("default")}
            ),
            5,
            "events",
        )
        assert "FilteringSucceed" in reasons
        succeed = [e for e in cluster.events("default") if e["reason"] == "BindingSucceed"][0]
        assert succeed["message"] == f"Successfully binding node [{node}] to default/p1"
        assert succeed["source"] == "hami-scheduler"


def test_hamis_order_patches_at_filter_and_bind_writes_only_bind_phase(cluster) -> None:
    """--allocation-write=filter: HAMi's own order, Filter's patch before its answer, bind-phase at Bind."""
    pod = cluster.create(gpu_pod("p1", gpu=1, mem=3000, cores=30))
    with serve(cluster, allocation_write="filter") as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        node = svc.post("/filter", filter_args(pod, ["node-0", "node-1"]))["NodeNames"][0]
        [patch] = cluster.requests("PATCH", "/api/v1/namespaces/default/pods/p1")
        assert patch.json["metadata"]["annotations"]["hami.io/vgpu-node"] == node
        assert "hami.io/bind-phase" not in patch.json["metadata"]["annotations"]
        assert svc.post("/bind", bind_args(pod, node)) == {"Error": ""}
        [_, phase] = cluster.requests("PATCH", "/api/v1/namespaces/default/pods/p1")
        assert set(phase.json["metadata"]["annotations"]) == {"hami.io/bind-phase", "hami.io/bind-time"}
        assert cluster.get("pods", "p1", "default")["spec"]["nodeName"] == node


def test_the_binding_carries_the_allocation_in_one_write(cluster) -> None:
    """--allocation-write=binding: Bind takes the node lock, then one POST of the binding whose
    metadata the API server copies onto the pod: the same annotations and label as the default's
    patch, and no pod patch at all."""
    pod = cluster.create(gpu_pod("p1", gpu=1, mem=3000, cores=30))
    with serve(cluster, allocation_write="binding") as svc:
        settled(svc)
        node = "node-1"
        filtered(svc, pod, node)
        assert svc.post("/bind", bind_args(pod, node)) == {"Error": ""}
        assert cluster.requests("PATCH", "/api/v1/namespaces/default/pods/p1") == [], "no pod patch"
        [binding] = cluster.requests("POST", "/api/v1/namespaces/default/pods/p1/binding")
        meta = binding.json["metadata"]
        assert meta["uid"] == pod["metadata"]["uid"] and meta["labels"] == {"hami.io/vgpu-node": node}
        [lock_patch] = [r for r in cluster.requests("PATCH", f"/api/v1/nodes/{node}") if LOCK in str(r.json)]
        assert lock_patch.time <= binding.time, "the lock, then the binding"
        stored = cluster.get("pods", "p1", "default")
        annotations = stored["metadata"]["annotations"]
        assert stored["spec"]["nodeName"] == node and stored["metadata"]["labels"]["hami.io/vgpu-node"] == node
        assert re.fullmatch(rf"GPU-{node}-\d,NVIDIA,3000,30:;", annotations["hami.io/vgpu-devices-allocated"])
        assert annotations["hami.io/vgpu-devices-to-allocate"] == annotations["hami.io/vgpu-devices-allocated"]
        assert annotations["hami.io/bind-phase"] == "allocating" and annotations["hami.io/bind-time"].isdigit()
        assert annotations["hami.io/vgpu-node"] == node


def test_a_refused_binding_writes_no_allocation(cluster) -> None:
    """--allocation-write=binding: a binding the API server refuses (the pod already bound elsewhere)
    leaves the pod without any allocation annotation and the node lock released."""
    pod = cluster.create(gpu_pod("p1", gpu=1, mem=3000))
    with serve(cluster, allocation_write="binding") as svc:
        settled(svc)
        filtered(svc, pod, "node-1")
        cluster.update("pods", "p1", lambda p: {**p, "spec": {**p["spec"], "nodeName": "node-0"}}, "default")
        error = svc.post("/bind", bind_args(pod, "node-1"))["Error"]
        assert "already assigned" in error, error
        stored = cluster.get("pods", "p1", "default")
        assert not any(k.startswith("hami.io/") for k in stored["metadata"].get("annotations") or {})
        assert LOCK not in (cluster.get("nodes", "node-1")["metadata"].get("annotations") or {})


@pytest.mark.parametrize("version", ["1.34", "unreadable"])
def test_binding_mode_patches_the_pod_where_the_server_would_drop_the_label(cluster, version) -> None:
    """Before Kubernetes 1.35 the API server does not copy a binding's labels (HAMi's vgpu-node label
    would be lost), and a server whose version cannot be read may be one: Bind patches the pod first."""
    if version == "unreadable":
        cluster.fail("GET", "/version", status=403)
    else:
        cluster.server.version = version
    pod = cluster.create(gpu_pod("p1", gpu=1, mem=3000))
    with serve(cluster, allocation_write="binding") as svc:
        settled(svc)
        assert svc.runtime.scheduler.mode == "bind"
        filtered(svc, pod, "node-0")
        assert svc.post("/bind", bind_args(pod, "node-0")) == {"Error": ""}
        [patch] = cluster.requests("PATCH", "/api/v1/namespaces/default/pods/p1")
        assert patch.json["metadata"]["labels"] == {"hami.io/vgpu-node": "node-0"}
        assert cluster.get("pods", "p1", "default")["metadata"]["labels"]["hami.io/vgpu-node"] == "node-0"


def test_events_still_queued_at_shutdown_go_out_within_a_pods_grace_period(cluster) -> None:
    """Stopping while the API server takes 4 s per Event (or HAMi's QPS 5 holds a burst back): the
    queued Events are posted before the process ends, not dropped after a few seconds."""
    pod = cluster.create(gpu_pod("huge", gpu=3, mem=100))
    svc = serve(cluster).__enter__()
    try:
        settled(svc)
        cluster.delay("POST", re.compile(r"/events$"), 4.0)
        assert svc.post("/filter", filter_args(pod, ["node-0"]))["NodeNames"] is None
    finally:
        svc.stop()
    assert not svc.thread.is_alive(), "stopped"
    assert {e["reason"] for e in cluster.events("default")} == {"FilteringFailed"}
    assert svc.runtime.event_sink.dropped.get("shutdown", 0) == 0


def test_bind_guard_refuses_a_pod_without_an_allocation(cluster) -> None:
    """No pod is ever bound without its allocation annotations: a Bind for a pod this process never
    filtered (or filtered onto another node) and that carries no annotations for the node is refused
    before anything is written; kube-scheduler then schedules the pod again."""
    pod = cluster.create(gpu_pod("p", gpu=1, mem=1000))
    with serve(cluster) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        error = svc.post("/bind", bind_args(pod, "node-0"))["Error"]
        assert "hami-fast holds no allocation for it on node node-0" in error and "default/p" in error, error
        assert cluster.requests("PATCH", "/api/v1/namespaces/default/pods/p") == []
        assert cluster.requests("POST", "/api/v1/namespaces/default/pods/p/binding") == []
        assert LOCK not in (cluster.get("nodes", "node-0")["metadata"].get("annotations") or {})
        failed = wait_for(
            lambda: [e for e in cluster.events("default") if e["reason"] == "BindingFailed"], 5, "BindingFailed"
        )
        assert "no allocation" in failed[0]["message"]

        assert svc.post("/filter", filter_args(pod, ["node-0"]))["NodeNames"] == ["node-0"]
        error = svc.post("/bind", bind_args(pod, "node-1"))["Error"]
        assert error == "pod default/p: hami-fast allocated it on node node-0, not node-1: not binding", error
        assert cluster.get("pods", "p", "default")["spec"].get("nodeName") is None
        assert svc.post("/bind", bind_args(pod, "node-0")) == {"Error": ""}


@pytest.mark.parametrize("mode", ["bind", "binding"])
def test_bind_guard_accepts_a_pod_whose_annotations_are_already_on_it(cluster, mode) -> None:
    """A pod annotated before this process started (HAMi's order, or --allocation-write=filter before a
    restart) is bound with bind-phase only (a pod patch, or the binding's own metadata), its
    allocation untouched."""
    pod = gpu_pod("pre", gpu=1, mem=1000)
    allocated = "GPU-node-0-0,NVIDIA,1000,0:;"
    pod["metadata"]["annotations"] = {
        "hami.io/vgpu-node": "node-0",
        "hami.io/vgpu-devices-allocated": allocated,
        "hami.io/vgpu-devices-to-allocate": allocated,
    }
    pod = cluster.create(pod)
    with serve(cluster, allocation_write=mode) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        assert svc.post("/bind", bind_args(pod, "node-0")) == {"Error": ""}
        patches = cluster.requests("PATCH", "/api/v1/namespaces/default/pods/pre")
        [binding] = cluster.requests("POST", "/api/v1/namespaces/default/pods/pre/binding")
        [phase] = patches if mode == "bind" else [binding]
        assert (patches == []) == (mode == "binding")
        assert set(phase.json["metadata"]["annotations"]) == {"hami.io/bind-phase", "hami.io/bind-time"}
        stored = cluster.get("pods", "pre", "default")
        assert stored["spec"]["nodeName"] == "node-0"
        assert stored["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] == allocated


def test_unschedulable_pod_gets_reasons_and_an_event(cluster) -> None:
    pod = cluster.create(gpu_pod("huge", gpu=3, mem=100))
    with serve(cluster) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        result = svc.post("/filter", filter_args(pod, ["node-0", "node-1"]))
        assert result["NodeNames"] is None
        assert result["FailedNodes"] == {"node-0": "NodeInsufficientDevice", "node-1": "NodeInsufficientDevice"}
        messages = wait_for(
            lambda: [e["message"] for e in cluster.events("default") if e["reason"] == "FilteringFailed"], 5, "event"
        )
        assert "no available node, 2 nodes do not meet" in messages or len(messages) >= 1
        assert scheduling_patches(cluster) == 0


def test_filter_patches_before_it_answers_in_hamis_order(cluster) -> None:
    """--allocation-write=filter, HAMi's order: an answered Filter is already on the API, so a crash after
    the answer loses nothing; a failed patch is Filter's own error and rolls the reservation back."""
    pod = cluster.create(gpu_pod("p", gpu=1, mem=16384, cores=100))
    with serve(cluster, allocation_write="filter") as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        cluster.fail("PATCH", "/api/v1/namespaces/default/pods/p", 500, times=4)  # every try
        result = svc.post("/filter", filter_args(pod, ["node-0"]))
        assert result["NodeNames"] in (None, []) and result["Error"].startswith("patch pod annotations"), result
        assert svc.cluster.pod_count() == 0
        assert all(d["used"] == 0 for d in device_usage(svc).values())
        cluster.delay("PATCH", "/api/v1/namespaces/default/pods/p", 0.5, times=1)
        started = time.monotonic()
        assert svc.post("/filter", filter_args(pod, ["node-0"]))["NodeNames"] == ["node-0"]
        assert time.monotonic() - started >= 0.5, "Filter answered before its patch was written"
        stored = cluster.get("pods", "p", "default")
        assert stored["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"].startswith("GPU-node-0-")


def test_a_failed_allocation_write_at_bind_binds_nothing_and_releases_the_lock(cluster) -> None:
    """--allocation-write=bind: when Bind's one pod patch fails, the pod is not bound (the device plugin
    would find no annotations), the node lock is released, and the next Filter and Bind succeed."""
    pod = cluster.create(gpu_pod("p", gpu=1, mem=16384, cores=100))
    with serve(cluster, allocation_write="bind") as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        assert svc.post("/filter", filter_args(pod, ["node-0"]))["NodeNames"] == ["node-0"]
        cluster.fail("PATCH", "/api/v1/namespaces/default/pods/p", 500, times=4)  # every try
        error = svc.post("/bind", bind_args(pod, "node-0"))["Error"]
        assert "500" in error, error
        assert cluster.requests("POST", "/api/v1/namespaces/default/pods/p/binding") == []
        assert cluster.get("pods", "p", "default")["spec"].get("nodeName") is None
        assert LOCK not in (cluster.get("nodes", "node-0")["metadata"].get("annotations") or {})
        assert svc.post("/filter", filter_args(pod, ["node-0"]))["NodeNames"] == ["node-0"]
        assert svc.post("/bind", bind_args(pod, "node-0")) == {"Error": ""}
        stored = cluster.get("pods", "p", "default")
        assert stored["spec"]["nodeName"] == "node-0"
        assert stored["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"].startswith("GPU-node-0-")
        assert svc.cluster.pod_count() == 1


def test_failed_patch_rolls_the_reservation_back(cluster) -> None:
    """--filter-patch-behind-answer: Filter answers once the engine has reserved; its annotation patch
    follows, and Bind waits for it. A failed patch rolls the reservation back and fails the Bind, so
    kube-scheduler schedules again."""
    pod = cluster.create(gpu_pod("p", gpu=1, mem=16384, cores=100))
    with serve(cluster, filter_patch_behind_answer=True) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        cluster.fail("PATCH", "/api/v1/namespaces/default/pods/p", 500, times=4)  # every try
        result = svc.post("/filter", filter_args(pod, ["node-0"]))
        assert result["NodeNames"] == ["node-0"]
        wait_for(lambda: svc.cluster.pod_count() == 0, 5, "reservation rolled back")
        assert all(d["used"] == 0 for d in device_usage(svc).values())
        failed = wait_for(
            lambda: [e for e in cluster.events("default") if e["reason"] == "FilteringFailed"], 5, "FilteringFailed"
        )
        assert "patch pod annotations" in failed[0]["message"]
        error = svc.post("/bind", bind_args(pod, "node-0"))["Error"]
        assert error.startswith("patch pod annotations"), error
        assert cluster.get("pods", "p", "default")["spec"].get("nodeName") is None
        assert LOCK not in (cluster.get("nodes", "node-0")["metadata"].get("annotations") or {})
        again = svc.post("/filter", filter_args(pod, ["node-0"]))
        assert again["NodeNames"] == ["node-0"]
        assert svc.post("/bind", bind_args(pod, "node-0")) == {"Error": ""}
        stored = cluster.get("pods", "p", "default")
        assert stored["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"].startswith("GPU-node-0-")


def test_bind_waits_for_filters_annotation_patch(cluster) -> None:
    """Bind never runs ahead of Filter's patch: the device plugin finds the annotations at Allocate."""
    pod = cluster.create(gpu_pod("slow", gpu=1, mem=1000))
    with serve(cluster, filter_patch_behind_answer=True) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        cluster.delay("PATCH", "/api/v1/namespaces/default/pods/slow", 1.0, times=1)
        started = time.monotonic()
        assert svc.post("/filter", filter_args(pod, ["node-0"]))["NodeNames"] == ["node-0"]
        assert time.monotonic() - started < 0.8, "Filter must not wait for its patch"
        assert svc.post("/bind", bind_args(pod, "node-0")) == {"Error": ""}
        [patch] = cluster.requests("PATCH", "/api/v1/namespaces/default/pods/slow")[:1]
        [binding] = cluster.requests("POST", "/api/v1/namespaces/default/pods/slow/binding")
        assert binding.time >= patch.time + 0.9, "the binding was posted before the annotations were written"
        stored = cluster.get("pods", "slow", "default")
        assert stored["metadata"]["annotations"]["hami.io/vgpu-devices-to-allocate"]


def test_lock_contention_dangling_and_expired_locks(cluster) -> None:
    first, second = cluster.create(gpu_pod("a", gpu=1, mem=100)), cluster.create(gpu_pod("b", gpu=1, mem=100))
    with serve(cluster, bind_wait_timeout=0) as svc:  # HAMi's fail-fast; waiting: tests/server/test_bind_queue.py
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        filtered(svc, first, "node-0")
        filtered(svc, second, "node-0")
        assert svc.post("/bind", bind_args(first, "node-0"))["Error"] == ""
        error = svc.post("/bind", bind_args(second, "node-0"))["Error"]
        assert error == "node node-0 has been locked within 5m0s: node lock contention"
        assert cluster.get("pods", "b", "default")["spec"].get("nodeName") is None
        assert LOCK_VALUE.match(cluster.get("nodes", "node-0")["metadata"]["annotations"][LOCK]).group("name") == "a"
        failed = wait_for(
            lambda: [e for e in cluster.events("default") if e["reason"] == "BindingFailed"], 5, "BindingFailed"
        )
        assert "node lock contention" in failed[0]["message"]

        # The owner disappears: its lock is dangling and is taken over.
        cluster.delete("pods", "a", "default")
        assert svc.post("/bind", bind_args(second, "node-0"))["Error"] == ""
        assert LOCK_VALUE.match(cluster.get("nodes", "node-0")["metadata"]["annotations"][LOCK]).group("name") == "b"

        # An expired lock is released whoever owns it.
        old = (datetime.now(UTC) - timedelta(minutes=6)).strftime("%Y-%m-%dT%H:%M:%SZ")
        cluster.patch("nodes", "node-1", {"metadata": {"annotations": {LOCK: f"{old},default,b"}}})
        third = filtered(svc, cluster.create(gpu_pod("c", gpu=1, mem=100)), "node-1")
        assert svc.post("/bind", bind_args(third, "node-1"))["Error"] == ""


def lock_taken(age: timedelta, owner: str) -> str:
    return f"{(datetime.now(UTC) - age).strftime('%Y-%m-%dT%H:%M:%SZ')},default,{owner}"


def test_a_lock_whose_owner_was_bound_elsewhere_is_released_once_older_than_a_bind(cluster) -> None:
    """A replica died between lock and binding; kube-scheduler then bound the pod elsewhere. HAMi
    keeps the node locked for five minutes; the owner's binding shows the lock can never be used."""
    cluster.create(gpu_node("node-2"))
    owner = cluster.create(gpu_pod("owner", gpu=1, mem=100))
    with serve(cluster, bind_wait_timeout=0) as svc:
        settled(svc)
        assert svc.post("/bind", bind_args(filtered(svc, owner, "node-1"), "node-1"))["Error"] == ""
        # owner's earlier, unfinished bind onto node-0 (10 s old) and node-2 (a minute old)
        cluster.patch(
            "nodes", "node-0", {"metadata": {"annotations": {LOCK: lock_taken(timedelta(seconds=10), "owner")}}}
        )
        cluster.patch(
            "nodes", "node-2", {"metadata": {"annotations": {LOCK: lock_taken(timedelta(minutes=1), "owner")}}}
        )

        young = filtered(svc, cluster.create(gpu_pod("young", gpu=1, mem=100)), "node-0")
        assert "node lock contention" in svc.post("/bind", bind_args(young, "node-0"))["Error"], (
            "could be a bind in flight"
        )
        old = filtered(svc, cluster.create(gpu_pod("old", gpu=1, mem=100)), "node-2")
        assert svc.post("/bind", bind_args(old, "node-2"))["Error"] == ""
        assert LOCK_VALUE.match(cluster.get("nodes", "node-2")["metadata"]["annotations"][LOCK]).group("name") == "old"


def test_a_lock_the_device_plugin_failed_to_release_is_taken_once_older_than_a_bind(cluster) -> None:
    """The device plugin answered the owner (`bind-phase: success`, or `failed`) and then lost its lock
    release (the API server restarting between its two writes): HAMi keeps the node locked for five
    minutes; once older than a bind, the next Bind takes the lock."""
    done = {
        "success": cluster.create(gpu_pod("allocated", gpu=1, mem=100)),
        "failed": cluster.create(gpu_pod("refused", gpu=1, mem=100)),
    }
    with serve(cluster, bind_wait_timeout=0) as svc:
        settled(svc)
        for (phase, pod), node in zip(done.items(), ("node-0", "node-1"), strict=True):
            assert svc.post("/bind", bind_args(filtered(svc, pod, node), node))["Error"] == ""
            name = pod["metadata"]["name"]
            cluster.patch("pods", name, {"metadata": {"annotations": {"hami.io/bind-phase": phase}}}, "default")
            young = lock_taken(timedelta(seconds=10), name)
            cluster.patch("nodes", node, {"metadata": {"annotations": {LOCK: young}}})
            early = filtered(svc, cluster.create(gpu_pod(f"early-{node}", gpu=1, mem=100)), node)
            assert "node lock contention" in svc.post("/bind", bind_args(early, node))["Error"], "a release in flight"
            cluster.patch("nodes", node, {"metadata": {"annotations": {LOCK: lock_taken(timedelta(minutes=1), name)}}})
            late = filtered(svc, cluster.create(gpu_pod(f"late-{node}", gpu=1, mem=100)), node)
            assert svc.post("/bind", bind_args(late, node))["Error"] == "", phase
            taken = cluster.get("nodes", node)["metadata"]["annotations"][LOCK]
            assert LOCK_VALUE.match(taken).group("name") == f"late-{node}"


def test_an_old_lock_whose_owner_is_bound_to_that_node_or_unbound_holds(cluster) -> None:
    """The device plugin releases the lock of a pod bound to its node once it has allocated it
    (`bind-phase: allocating` until then); an unbound owner may still bind there."""
    here = cluster.create(gpu_pod("here", gpu=1, mem=100))
    cluster.create(gpu_pod("waiting", gpu=1, mem=100))
    with serve(cluster, bind_wait_timeout=0) as svc:
        settled(svc)
        assert svc.post("/bind", bind_args(filtered(svc, here, "node-0"), "node-0"))["Error"] == ""
        cluster.patch(
            "nodes", "node-0", {"metadata": {"annotations": {LOCK: lock_taken(timedelta(minutes=1), "here")}}}
        )
        cluster.patch(
            "nodes", "node-1", {"metadata": {"annotations": {LOCK: lock_taken(timedelta(minutes=1), "waiting")}}}
        )
        for node in ("node-0", "node-1"):
            pod = filtered(svc, cluster.create(gpu_pod(f"next-{node}", gpu=1, mem=100)), node)
            assert "node lock contention" in svc.post("/bind", bind_args(pod, node))["Error"], node


def test_lock_conflicts_are_retried(cluster) -> None:
    pod = cluster.create(gpu_pod("a", gpu=1, mem=100))
    with serve(cluster) as svc:
        # The first registration pass writes the handshake right after sync; let it land before the
        # faults are armed, so they hit the lock's writes and not the handshake's.
        settled(svc)
        filtered(svc, pod, "node-0")
        cluster.fail("PATCH", "/api/v1/nodes/node-0", 409, times=2)
        assert svc.post("/bind", bind_args(pod, "node-0"))["Error"] == ""
        assert scheduling_patches(cluster, "/api/v1/nodes/node-0") == 3


def test_a_lock_write_refused_or_answered_too_late_is_retried_and_taken_once(cluster) -> None:
    """503, then a write made whose answer is lost (its retry meets 409 on the changed node, reads
    it again and finds its own lock): the Bind goes on, and the node's lock is released after."""
    pod = cluster.create(gpu_pod("a", gpu=1, mem=100))
    with serve(cluster) as svc:
        settled(svc)
        filtered(svc, pod, "node-0")
        cluster.fail("PATCH", "/api/v1/nodes/node-0", 503)
        cluster.fail("PATCH", "/api/v1/nodes/node-0", 500, after=True)
        assert svc.post("/bind", bind_args(pod, "node-0"))["Error"] == ""
        assert cluster.get("pods", "a", "default")["spec"]["nodeName"] == "node-0"
        lock = (cluster.get("nodes", "node-0")["metadata"].get("annotations") or {}).get("hami.io/mutex.lock", "")
        assert lock.endswith(",default,a"), "the pod's own lock, taken once"


def test_listed_nodes_feed_the_lock_read(cluster) -> None:
    """NodeLockFeed: a list page hands each node's lock value and resourceVersion to NodeLocks."""
    from hami_fast._native import Cluster
    from hami_fast.kube.client import KubeClient, load_api_client
    from hami_fast.kube.reflector import NODES, Reflector
    from hami_fast.kube.writer import NodeLockFeed, NodeLocks

    cluster.patch("nodes", "node-1", {"metadata": {"annotations": {LOCK: "2026-01-01T00:00:00Z,default,x"}}})
    locks = NodeLocks()
    locks.observe("gone", {"resourceVersion": "1"})
    client = KubeClient(load_api_client(cluster.kubeconfig), qps=0)
    reflector = Reflector(client, NodeLockFeed(Cluster(), locks), NODES, threading.Event(), page_size=1)
    reflector.list()
    for node, lock in (("node-0", None), ("node-1", "2026-01-01T00:00:00Z,default,x")):
        assert locks.take(node) == (lock, cluster.get("nodes", node)["metadata"]["resourceVersion"])
    assert locks.take("gone") is None, "a node the re-list did not show is forgotten"


def test_the_first_lock_on_a_node_reads_no_node_and_a_stale_read_retries_live(cluster) -> None:
    """With the node watch silent from the start, the lock's first read comes from the list (and the
    handshake writes' answers): binding onto a node never GETs it. A stale read (the node locked by
    another scheduler behind the watch's back) gets 409 on the lock write and the retry reads the
    node live, which shows the other pod's lock: contention, as HAMi."""
    first = cluster.create(gpu_pod("a", gpu=1, mem=100))
    second = cluster.create(gpu_pod("b", gpu=1, mem=100))
    cluster.create(gpu_pod("holder", gpu=1, mem=100))
    cluster.stall_watches("/api/v1/nodes*")
    with serve(cluster, bind_wait_timeout=0) as svc:
        settled(svc)
        filtered(svc, first, "node-0")
        assert svc.post("/bind", bind_args(first, "node-0")) == {"Error": ""}
        assert cluster.requests("GET", "/api/v1/nodes/node-0") == [], "the lock read GET the node"
        assert LOCK_VALUE.match(cluster.get("nodes", "node-0")["metadata"]["annotations"][LOCK]).group("name") == "a"

        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        cluster.patch("nodes", "node-1", {"metadata": {"annotations": {LOCK: f"{stamp},default,holder"}}})
        filtered(svc, second, "node-1")
        error = svc.post("/bind", bind_args(second, "node-1"))["Error"]
        assert error == "node node-1 has been locked within 5m0s: node lock contention"
        writes = [r for r in cluster.requests("PATCH", "/api/v1/nodes/node-1") if LOCK in str(r.json)]
        assert [r.status for r in writes] == [409], "one lock write, on the stale read, refused"
        assert len(cluster.requests("GET", "/api/v1/nodes/node-1")) == 1, "the retry read the node live"
        assert cluster.requests("GET", "/api/v1/namespaces/default/pods/holder") == [], "the owner is watched"
        assert cluster.get("nodes", "node-1")["metadata"]["annotations"][LOCK] == f"{stamp},default,holder"
        assert cluster.get("pods", "b", "default")["spec"].get("nodeName") is None
    cluster.unstall_watches()


def test_bind_failure_releases_the_lock(cluster) -> None:
    pod = cluster.create(gpu_pod("a", gpu=1, mem=100))
    with serve(cluster) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        filtered(svc, pod, "node-0")
        cluster.fail("POST", "/api/v1/namespaces/default/pods/a/binding", 500, times=4)  # every try
        assert "500" in svc.post("/bind", bind_args(pod, "node-0"))["Error"]
        assert LOCK not in (cluster.get("nodes", "node-0")["metadata"].get("annotations") or {})
        # The annotations were written before the failed binding: a Bind onto a node that does not
        # exist is refused by the guard (they name node-0), one onto node-0 goes through.
        assert "not ghost" in svc.post("/bind", bind_args(pod, "ghost"))["Error"]
        assert svc.post("/bind", bind_args(pod, "node-0"))["Error"] == ""


def test_watch_drops_and_410_are_survived(cluster) -> None:
    with serve(cluster) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        cluster.wait_for_watches(3)
        cluster.drop_watches()
        cluster.create(gpu_node("node-2"))
        wait_for(lambda: svc.cluster.node_count() == 3, 10, "node-2 after a dropped watch")
        cluster.expire_next_watch("/api/v1/nodes*")
        cluster.drop_watches("/api/v1/nodes*")
        cluster.compact()
        cluster.create(gpu_node("node-3"))
        wait_for(lambda: svc.cluster.node_count() == 4, 10, "node-3 after 410")
        cluster.delete("nodes", "node-3")
        wait_for(lambda: svc.cluster.node_count() == 3, 10, "node-3 deletion")
        lists = [r for r in cluster.requests("GET", "/api/v1/nodes") if "watch" not in r.query]
        assert len(lists) >= 2


def test_allocations_survive_a_restart(cluster) -> None:
    """Bound pods' allocations are rebuilt from the API after a restart (any --allocation-write)."""
    pods = [cluster.create(gpu_pod(f"p{i}", gpu=1, mem=2000, cores=10)) for i in range(6)]
    with serve(cluster) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        for pod in pods:
            node = svc.post("/filter", filter_args(pod, ["node-0", "node-1"]))["NodeNames"][0]
            assert svc.post("/bind", bind_args(pod, node)) == {"Error": ""}
            cluster.patch("nodes", node, {"metadata": {"annotations": {LOCK: None}}})  # the device plugin's part
        wait_for(lambda: svc.cluster.pod_count() == 6, 5, "reservations")
        before = device_usage(svc)
    with serve(cluster) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        assert svc.cluster.pod_count() == 6
        assert device_usage(svc) == before
        assert sum(d["usedmem"] for d in before.values()) == 12000


def test_filtered_allocations_survive_a_restart_in_hamis_order(cluster) -> None:
    """--allocation-write=filter: a filtered, not yet bound pod's allocation is on the API, so it survives."""
    pods = [cluster.create(gpu_pod(f"p{i}", gpu=1, mem=2000, cores=10)) for i in range(6)]
    with serve(cluster, allocation_write="filter") as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        for pod in pods:
            assert svc.post("/filter", filter_args(pod, ["node-0", "node-1"]))["NodeNames"]
        wait_for(lambda: svc.cluster.pod_count() == 6, 5, "reservations")
        before = device_usage(svc)
    with serve(cluster, allocation_write="filter") as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        assert svc.cluster.pod_count() == 6
        assert device_usage(svc) == before
        assert sum(d["usedmem"] for d in before.values()) == 12000


def test_a_filter_answered_before_a_restart_binds_nothing_after_it(cluster) -> None:
    """The default order: Filter's answer is only in memory until Bind writes it. After a restart the
    Bind guard refuses the pod (nothing written, nothing bound); kube-scheduler filters it again and
    the new answer binds, granted once."""
    pod = cluster.create(gpu_pod("p", gpu=1, mem=2000, cores=10))
    with serve(cluster) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        node = svc.post("/filter", filter_args(pod, ["node-0", "node-1"]))["NodeNames"][0]
    with serve(cluster) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        assert svc.cluster.pod_count() == 0
        assert "no allocation" in svc.post("/bind", bind_args(pod, node))["Error"]
        assert cluster.requests("POST", "/api/v1/namespaces/default/pods/p/binding") == []
        assert "hami.io/vgpu-node" not in (cluster.get("pods", "p", "default")["metadata"].get("annotations") or {})
        node = svc.post("/filter", filter_args(pod, ["node-0", "node-1"]))["NodeNames"][0]
        assert svc.post("/bind", bind_args(pod, node)) == {"Error": ""}
        assert sum(d["usedmem"] for d in device_usage(svc).values()) == 2000


def test_webhook_over_http_answers_in_the_version_received(cluster) -> None:
    pod = gpu_pod("w", gpu=1)
    pod["spec"]["schedulerName"] = "default-scheduler"
    with serve(cluster) as svc:
        for version in ("admission.k8s.io/v1", "admission.k8s.io/v1beta1"):
            answer = svc.post(
                "/webhook", {"apiVersion": version, "kind": "AdmissionReview", "request": {"uid": "u1", "object": pod}}
            )
            assert answer["apiVersion"] == version
            assert answer["response"]["allowed"] is True and answer["response"]["patchType"] == "JSONPatch"


def scheduler_lease(holder: str) -> dict:
    """kube-scheduler's Lease in kube-system, held by `holder` and just renewed."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "hami-scheduler", "namespace": "kube-system"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        },
    }


def test_non_leader_refuses_to_filter(cluster) -> None:
    cluster.create(scheduler_lease("someone-else_1234"))
    pod = cluster.create(gpu_pod("p", gpu=1, mem=100))
    with serve(cluster, leader_elect=True, leader_elect_resource_namespace="kube-system") as svc:
        time.sleep(0.5)
        assert "not the leader" in svc.post("/filter", filter_args(pod, ["node-0"]))["Error"]
        assert svc.request("GET", "/readyz")[0] == 503
        import socket

        cluster.patch(
            "leases", "hami-scheduler", {"spec": {"holderIdentity": f"{socket.gethostname()}_x"}}, "kube-system"
        )
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "leadership")
        assert svc.post("/filter", filter_args(pod, ["node-0"]))["NodeNames"] == ["node-0"]


def test_a_replica_whose_term_ended_binds_nothing(cluster) -> None:
    """Filtered while leading, then the Lease moved: the Bind writes no lock, annotation or binding."""
    import socket

    cluster.create(scheduler_lease(f"{socket.gethostname()}_x"))
    pod = cluster.create(gpu_pod("p", gpu=1, mem=100))
    with serve(cluster, leader_elect=True, leader_elect_resource_namespace="kube-system") as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "leadership")
        node = svc.post("/filter", filter_args(pod, ["node-0", "node-1"]))["NodeNames"][0]
        cluster.patch("leases", "hami-scheduler", {"spec": {"holderIdentity": "someone-else_1"}}, "kube-system")
        wait_for(lambda: not svc.runtime.scheduler.ready(), 10, "the term's end")
        assert "not the leader" in svc.post("/bind", bind_args(pod, node))["Error"]
        assert cluster.requests("POST", "/api/v1/namespaces/default/pods/p/binding") == []
        assert "hami.io/mutex.lock" not in (cluster.get("nodes", node)["metadata"].get("annotations") or {})
        assert "hami.io/bind-phase" not in (cluster.get("pods", "p", "default")["metadata"].get("annotations") or {})


def test_a_write_whose_term_ends_while_it_waits_to_be_sent_is_not_sent(cluster) -> None:
    """The leadership check runs after the client's rate limiter, just before each try is sent."""
    from hami_fast.kube.client import KubeClient, load_api_client
    from hami_fast.kube.lease import Leadership, NotLeading, leading_guard
    from hami_fast.kube.writer import KubeWriter

    cluster.create(gpu_pod("p", gpu=1, mem=100))
    leading = Leadership()
    leading.set()
    client = KubeClient(load_api_client(cluster.kubeconfig), qps=1, burst=1, timeout=10)
    writer = KubeWriter(client, guard=leading_guard(leading))
    writer.patch_pod("default", "p", b'{"metadata":{"annotations":{"a":"1"}}}')  # the burst's one token
    ended = threading.Timer(0.3, leading.clear)  # while the next write waits ~1 s for a token
    ended.start()
    with pytest.raises(NotLeading):
        writer.bind("default", "p", "uid", "node-0")
    ended.join()
    assert cluster.requests("POST", "/api/v1/namespaces/default/pods/p/binding") == []
    assert len(cluster.requests("PATCH", "/api/v1/namespaces/default/pods/p")) == 1


def test_a_bind_whose_term_ends_after_its_lock_leaves_the_lock_to_the_next_leader(cluster) -> None:
    """The next leader may be binding this very pod under the same lock (HAMi lets a pod take the
    lock it holds): the replica whose term ended must not delete it."""
    pod = cluster.create(gpu_pod("p", gpu=1, mem=100))
    with serve(cluster) as svc:
        settled(svc)
        filtered(svc, pod, "node-0")
        scheduler = svc.runtime.scheduler
        scheduler.before_patch = lambda *_: scheduler.leading.clear()
        assert "not the leader" in svc.post("/bind", bind_args(pod, "node-0"))["Error"]
        assert LOCK_VALUE.match(cluster.get("nodes", "node-0")["metadata"]["annotations"][LOCK]).group("name") == "p"
        assert cluster.requests("POST", "/api/v1/namespaces/default/pods/p/binding") == []


def node_lists(cluster) -> int:
    return len([r for r in cluster.requests("GET", "/api/v1/nodes") if "watch" not in r.query])


def test_a_broken_watch_resumes_from_its_resource_version_without_a_list(cluster) -> None:
    """The API server went away (a cut connection, then 503 twice while it comes back): the node
    watch is re-opened from the last resourceVersion, as client-go does; only a 410 lists again."""
    with serve(cluster) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        cluster.wait_for_watches(3)
        listed = node_lists(cluster)
        cluster.fail("GET", "/api/v1/nodes*", 503, times=2)
        cluster.drop_watches("/api/v1/nodes*")
        cluster.create(gpu_node("node-2"))
        wait_for(lambda: svc.cluster.node_count() == 3, 10, "node-2 after a broken watch")
        assert node_lists(cluster) == listed, "resumed from its resourceVersion: no LIST"
        (nodes,) = [r for r in svc.runtime.reflectors if r.resource.kind == "Node"]
        assert nodes.stats.resumed >= 3, "the cut and each 503 resumed the watch"
        cluster.expire_next_watch("/api/v1/nodes*")
        cluster.drop_watches("/api/v1/nodes*")
        cluster.create(gpu_node("node-3"))
        wait_for(lambda: svc.cluster.node_count() == 4, 10, "node-3 after 410")
        assert node_lists(cluster) == listed + 1, "410: the version is gone, so one LIST"


def test_which_broken_watches_resume() -> None:
    from hami_fast.kube import errors
    from hami_fast.kube.reflector import resumable

    assert resumable(OSError("connection refused")) and resumable(errors.Unreachable("reset"))
    assert resumable(errors.api_error(429, "TooManyRequests", "slow down", "WATCH", "/api/v1/nodes"))
    assert resumable(errors.api_error(503, "ServiceUnavailable", "starting", "WATCH", "/api/v1/nodes"))
    assert not resumable(errors.api_error(410, "Expired", "too old", "WATCH", "/api/v1/nodes")), "410 lists again"
    assert not resumable(errors.api_error(403, "Forbidden", "no", "WATCH", "/api/v1/nodes"))


def test_bind_retries_a_busy_or_failing_api_server(cluster) -> None:
    """429 with Retry-After and 503 on the patch, then a 500 given after the binding was made (the
    answer lost): the Bind still succeeds, once, on the node Filter chose."""
    from hami_fast.kube.retry import RETRIES

    pod = cluster.create(gpu_pod("p", gpu=1, mem=2000, cores=10))
    before = dict(RETRIES)
    with serve(cluster, allocation_write="bind") as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        node = svc.post("/filter", filter_args(pod, ["node-0", "node-1"]))["NodeNames"][0]
        cluster.fail("PATCH", "/api/v1/namespaces/default/pods/p", 429, retry_after=1)
        cluster.fail("PATCH", "/api/v1/namespaces/default/pods/p", 503)
        cluster.fail("POST", "/api/v1/namespaces/default/pods/p/binding", 500, after=True)
        started = time.monotonic()
        assert svc.post("/bind", bind_args(pod, node)) == {"Error": ""}
        assert time.monotonic() - started >= 0.9, "the 429's Retry-After was honoured"
    assert cluster.get("pods", "p", "default")["spec"]["nodeName"] == node
    assert len(cluster.requests("POST", "/api/v1/namespaces/default/pods/p/binding")) == 2
    assert RETRIES[429] > before.get(429, 0) and RETRIES[500] > before.get(500, 0)
    scraped = generate_latest(svc.runtime.metrics.registry).decode()
    assert f'hami_fast_api_write_retries_total{{status="429"}} {float(RETRIES[429])}' in scraped


def bound_by_an_earlier_attempt(cluster, pod: dict, node: str) -> dict[str, str]:
    """What a binding whose answer was lost leaves: the pod on `node` with that attempt's allocation
    (kube-scheduler has not seen it yet and filters the pod again). Its annotations, as stored."""
    earlier = {"hami.io/vgpu-node": node, "hami.io/vgpu-devices-allocated": f"GPU-{node}-7,NVIDIA,2000,10:;"}
    cluster.patch("pods", pod["metadata"]["name"], {"metadata": {"annotations": earlier}}, "default")
    binding = {"metadata": {"name": pod["metadata"]["name"]}, "target": {"name": node}}
    cluster.core_v1.create_namespaced_binding("default", binding, _preload_content=False)
    return cluster.get("pods", pod["metadata"]["name"], "default")["metadata"]["annotations"]


def test_a_pod_bound_by_an_answer_lost_binding_keeps_its_allocation_at_the_next_bind(cluster) -> None:
    """--allocation-write=bind: the annotation patch carries the pod's resourceVersion as Filter saw
    it. A pod bound since (with another allocation) is not patched: Bind answers an error, the pod
    keeps the allocation it is bound with, nothing is counted twice."""
    pod = cluster.create(gpu_pod("p", gpu=1, mem=2000, cores=10))
    with serve(cluster, allocation_write="bind") as svc:
        settled(svc)
        filtered(svc, pod, "node-0")
        earlier = bound_by_an_earlier_attempt(cluster, pod, "node-1")
        answer = svc.post("/bind", bind_args(pod, "node-0"))
        assert "bound to node node-1 already" in answer["Error"]
        [patch] = cluster.requests("PATCH", "/api/v1/namespaces/default/pods/p")
        assert patch.status == 409 and patch.json["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]
        assert cluster.requests("POST", "/api/v1/namespaces/default/pods/p/binding") == []
        stored = cluster.get("pods", "p", "default")
        assert stored["spec"]["nodeName"] == "node-1" and stored["metadata"]["annotations"] == earlier
        assert LOCK not in (cluster.get("nodes", "node-0")["metadata"].get("annotations") or {}), "lock released"


def test_hamis_order_patches_only_a_pod_still_unbound_at_filter(cluster) -> None:
    """--allocation-write=filter: Filter's patch carries the pod's resourceVersion too; a pod
    changed since is read again and patched only while it is unbound."""
    pod = cluster.create(gpu_pod("p", gpu=1, mem=2000, cores=10))
    with serve(cluster, allocation_write="filter") as svc:
        settled(svc)
        cluster.patch("pods", "p", {"metadata": {"labels": {"changed": "since"}}}, "default")
        assert svc.post("/filter", filter_args(pod, ["node-0"]))["NodeNames"] == ["node-0"]
        first, second = cluster.requests("PATCH", "/api/v1/namespaces/default/pods/p")
        assert (first.status, second.status) == (409, 200), "a stale version: read again, patched"
        assert cluster.get("pods", "p", "default")["metadata"]["annotations"]["hami.io/vgpu-node"] == "node-0"
        other = cluster.create(gpu_pod("q", gpu=1, mem=2000, cores=10))
        earlier = bound_by_an_earlier_attempt(cluster, other, "node-1")
        answer = svc.post("/filter", filter_args(other, ["node-0"]))
        assert "bound to node node-1 already" in answer["Error"] and not answer["NodeNames"]
        assert cluster.get("pods", "q", "default")["metadata"]["annotations"] == earlier


def test_a_binding_that_carries_the_allocation_is_retried_and_made_once(cluster) -> None:
    """The default (--allocation-write=binding): a 500 given after the binding was made (the answer
    lost): the retry's 409 means done, and the pod has its allocation from the first try."""
    pod = cluster.create(gpu_pod("p", gpu=1, mem=2000, cores=10))
    with serve(cluster) as svc:
        settled(svc)
        node = svc.post("/filter", filter_args(pod, ["node-0", "node-1"]))["NodeNames"][0]
        cluster.fail("POST", "/api/v1/namespaces/default/pods/p/binding", 500, after=True)
        assert svc.post("/bind", bind_args(pod, node)) == {"Error": ""}
        assert [r.status for r in cluster.requests("POST", "/api/v1/namespaces/default/pods/p/binding")] == [500, 409]
        assert cluster.requests("PATCH", "/api/v1/namespaces/default/pods/p") == []
    stored = cluster.get("pods", "p", "default")
    assert stored["spec"]["nodeName"] == node and stored["metadata"]["labels"]["hami.io/vgpu-node"] == node
    assert stored["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"].startswith(f"GPU-{node}-")


def test_bind_gives_up_on_an_api_server_that_keeps_failing(cluster) -> None:
    pod = cluster.create(gpu_pod("p", gpu=1, mem=2000, cores=10))
    with serve(cluster) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        node = svc.post("/filter", filter_args(pod, ["node-0", "node-1"]))["NodeNames"][0]
        cluster.fail("POST", "/api/v1/namespaces/default/pods/p/binding", 503, times=None)
        error = svc.post("/bind", bind_args(pod, node))["Error"]
        assert "503" in error
        assert len(cluster.requests("POST", "/api/v1/namespaces/default/pods/p/binding")) == 4, "4 tries in all"
        assert "hami.io/mutex.lock" not in (cluster.get("nodes", node)["metadata"].get("annotations") or {})


def test_a_bind_answers_within_bind_timeout_when_the_api_server_hangs(cluster) -> None:
    """Every binding POST hangs for 4 s; kube-scheduler waits --bind-timeout (here 3 s): the Bind's
    tries are cut to what is left of it, no retry starts that could not be answered in time, and the
    answer is the failure, with the node lock released, before kube-scheduler gives up."""
    pod = cluster.create(gpu_pod("p", gpu=1, mem=2000, cores=10))
    with serve(cluster, bind_timeout=3.0) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        node = svc.post("/filter", filter_args(pod, ["node-0", "node-1"]))["NodeNames"][0]
        cluster.delay("POST", "/api/v1/namespaces/default/pods/p/binding", 4.0)
        started = time.monotonic()
        error = svc.post("/bind", bind_args(pod, node))["Error"]
        took = time.monotonic() - started
    assert error, "the binding never answered in time: the Bind fails"
    assert took < 3.0, f"answered after {took:.2f} s, past kube-scheduler's 3 s"
    assert len(cluster.requests("POST", "/api/v1/namespaces/default/pods/p/binding")) == 1, "no retry past the deadline"
    assert "hami.io/mutex.lock" not in (cluster.get("nodes", node)["metadata"].get("annotations") or {})


def test_a_retry_after_longer_than_the_bind_timeout_left_is_not_waited(cluster) -> None:
    """A 503 asking to come back in 2 s, with 1.5 s of the Bind's time left: the Bind answers the
    503 at once instead of retrying after kube-scheduler stopped waiting."""
    pod = cluster.create(gpu_pod("p", gpu=1, mem=2000, cores=10))
    with serve(cluster, bind_timeout=3.5) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")
        node = svc.post("/filter", filter_args(pod, ["node-0", "node-1"]))["NodeNames"][0]
        cluster.fail("POST", "/api/v1/namespaces/default/pods/p/binding", 503, times=None, retry_after=2)
        started = time.monotonic()
        error = svc.post("/bind", bind_args(pod, node))["Error"]
        took = time.monotonic() - started
    assert "503" in error
    assert took < 1.0, f"waited {took:.2f} s for a retry that could not be answered in time"
    assert len(cluster.requests("POST", "/api/v1/namespaces/default/pods/p/binding")) == 1

"""Retry at release, served against the test API server: a pod Filter rejected for want of vGPU room
is patched (put back in kube-scheduler's active queue) once a release makes room for it, in
priority and age order, rate-limited, and never again before Filter rejects it again."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import serving
from hami_fast import annotations as keys
from hami_fast.server.requeue import TokenBucket
from k8s_objects import filter_args, gpu_node, gpu_pod, holding_pod
from kubeapi.fixtures import wait_for
from serving import Service

MEM = 16384  # every test GPU's memory


def pending(name: str, priority: int = 0, created: str = "2026-01-01T00:00:00Z", **limits: Any) -> dict[str, Any]:
    pod = gpu_pod(name, **limits)
    pod["spec"]["priority"] = priority
    pod["metadata"]["creationTimestamp"] = created
    return pod


def serve(kubeapi, **options: Any) -> Service:
    options.setdefault("vgpu_preemption", False)  # retry at release alone: the waiting pods' priorities must not evict
    return serving.serve(kubeapi, **options)


def started(svc: Service) -> None:
    wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")


def rejected(svc: Service, kubeapi, pod: dict[str, Any], nodes: list[str]) -> dict[str, Any]:
    """Create the pending pod and have Filter reject it, as kube-scheduler would ask."""
    created = kubeapi.create(pod)
    created["metadata"]["creationTimestamp"] = pod["metadata"]["creationTimestamp"]
    answer = svc.post("/filter", filter_args(created, nodes))
    assert answer["NodeNames"] in (None, []) and answer["FailedNodes"], answer
    return created


def requeues(kubeapi, name: str) -> list[Any]:
    """The requeue patches of pod `name`, in the order they were made."""
    patches = kubeapi.requests("PATCH", f"/api/v1/namespaces/default/pods/{name}")
    return [p for p in patches if keys.REQUEUED_AT in str(p.json) and p.status == 200]


def all_requeues(kubeapi) -> list[Any]:
    patches = kubeapi.requests("PATCH")
    return [p for p in patches if keys.REQUEUED_AT in str(p.json) and p.status == 200]


def sample(svc: Service, name: str) -> float | None:
    return svc.runtime.metrics.registry.get_sample_value(name)


def test_a_pod_waiting_for_a_held_gpu_is_requeued_when_the_holder_goes(one_gpu) -> None:
    one_gpu.create(holding_pod("holder"))
    with serve(one_gpu) as svc:
        started(svc)
        wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the holder in the engine")
        waiting = rejected(svc, one_gpu, pending("waiting", gpu=1, mem=4000), ["node-0"])
        assert svc.cluster.waiting_count() == 1
        assert sample(svc, "hami_fast_waiting_pods") == 1
        one_gpu.delete("pods", "holder", "default")
        [patch] = wait_for(lambda: requeues(one_gpu, "waiting"), 5, "the waiting pod requeued")
        assert patch.json["metadata"]["uid"] == waiting["metadata"]["uid"]
        stored = one_gpu.get("pods", "waiting", "default")
        assert stored["metadata"]["annotations"][keys.REQUEUED_AT].isdigit()
        assert int(stored["metadata"]["resourceVersion"]) > int(waiting["metadata"]["resourceVersion"])
        wait_for(lambda: sample(svc, "hami_fast_requeued_pods_total") == 1, 5, "the requeue counted")
        assert sample(svc, "hami_fast_requeue_patch_failures_total") == 0


def test_only_the_pods_that_fit_now_are_patched_highest_priority_then_oldest_first(kubeapi) -> None:
    """One GPU freed, room for two of the three half-GPU pods, and none for the two-GPU pod."""
    kubeapi.create(gpu_node("node-0", gpus=2, memory=MEM))
    kubeapi.create(holding_pod("holder-0", gpu=0))
    kubeapi.create(holding_pod("holder-1", gpu=1))
    with serve(kubeapi) as svc:
        started(svc)
        wait_for(lambda: svc.cluster.pod_count() == 2, 5, "the holders in the engine")
        half = MEM // 2
        rejected(svc, kubeapi, pending("old-low", 0, "2026-01-01T00:00:00Z", gpu=1, mem=half), ["node-0"])
        rejected(svc, kubeapi, pending("young-high", 100, "2026-01-09T00:00:00Z", gpu=1, mem=half), ["node-0"])
        rejected(svc, kubeapi, pending("young-low", 0, "2026-01-05T00:00:00Z", gpu=1, mem=half), ["node-0"])
        rejected(svc, kubeapi, pending("two-gpus", 1000, "2026-01-01T00:00:00Z", gpu=2), ["node-0"])
        kubeapi.delete("pods", "holder-0", "default")
        wait_for(lambda: len(all_requeues(kubeapi)) >= 2, 5, "two pods requeued")
        order = [p.path.rsplit("/", 1)[-1] for p in all_requeues(kubeapi)]
        assert order == ["young-high", "old-low"], "one pass: priority first, then age; the rest do not fit"
        assert svc.cluster.waiting_count() == 4, "requeued pods wait until Filter sees them again"


def test_a_requeued_pod_rejected_again_waits_for_the_next_release(one_gpu) -> None:
    one_gpu.create(holding_pod("holder"))
    with serve(one_gpu) as svc:
        started(svc)
        wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the holder in the engine")
        waiting = rejected(svc, one_gpu, pending("waiting", gpu=1, mem=MEM), ["node-0"])
        one_gpu.delete("pods", "holder", "default")
        wait_for(lambda: requeues(one_gpu, "waiting"), 5, "the first requeue")
        one_gpu.create(holding_pod("thief"))
        wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the thief in the engine")
        rejected_again = svc.post("/filter", filter_args(waiting, ["node-0"]))
        assert rejected_again["FailedNodes"], rejected_again
        requeuer = svc.runtime.requeuer
        passes = requeuer.passes
        for _ in range(3):
            requeuer.wake()
            wait_for(lambda p=passes: requeuer.passes > p, 5, "a requeue pass")
            passes = requeuer.passes
        assert len(requeues(one_gpu, "waiting")) == 1, "no retry without a release"
        one_gpu.delete("pods", "thief", "default")
        wait_for(lambda: len(requeues(one_gpu, "waiting")) == 2, 5, "the requeue after the next release")


def test_requeue_patches_are_rate_limited(one_gpu) -> None:
    """A burst of one and a rate that refills no token within the test: one patch, the next waits."""
    one_gpu.create(holding_pod("holder"))
    with serve(one_gpu, requeue_qps=0.001, requeue_burst=1) as svc:
        started(svc)
        wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the holder in the engine")
        for i in range(3):
            rejected(svc, one_gpu, pending(f"w{i}", 0, f"2026-01-0{i + 1}T00:00:00Z", gpu=1, mem=1000), ["node-0"])
        one_gpu.delete("pods", "holder", "default")
        bucket = svc.runtime.requeuer.bucket
        wait_for(lambda: bucket.waits >= 1, 5, "the second patch waiting for its token")
        assert [p.path.rsplit("/", 1)[-1] for p in all_requeues(one_gpu)] == ["w0"]


def test_a_failed_requeue_patch_is_counted(one_gpu) -> None:
    one_gpu.create(holding_pod("holder"))
    with serve(one_gpu) as svc:
        started(svc)
        wait_for(lambda: svc.cluster.pod_count() == 1, 5, "the holder in the engine")
        rejected(svc, one_gpu, pending("waiting", gpu=1, mem=1000), ["node-0"])
        one_gpu.fail("PATCH", "/api/v1/namespaces/default/pods/waiting", status=422)
        one_gpu.delete("pods", "holder", "default")
        wait_for(lambda: sample(svc, "hami_fast_requeue_patch_failures_total") == 1, 5, "the failure counted")
        assert sample(svc, "hami_fast_requeued_pods_total") == 0


def test_retry_at_release_is_off_with_a_zero_rate(one_gpu) -> None:
    with serve(one_gpu, requeue_qps=0) as svc:
        started(svc)
        assert svc.runtime.requeuer is None
        assert not any(t.name == "requeue" for t in svc.runtime.threads)


def test_token_bucket_spends_its_burst_then_one_token_per_period() -> None:
    now = [100.0]
    bucket = TokenBucket(rate=2.0, burst=3, clock=lambda: now[0])
    stop = threading.Event()
    assert all(bucket.take(stop) for _ in range(3))
    assert bucket.delay() == pytest.approx(0.5)
    now[0] += 0.25
    assert bucket.delay() == pytest.approx(0.25)
    now[0] += 10
    assert bucket.delay() == 0.0 and bucket.tokens == 3, "never more than the burst saved up"
    stop.set()
    for _ in range(3):
        bucket.take(stop)
    assert bucket.take(stop) is False, "a stop ends the wait for a token"

"""Filter, bind and webhook as HAMi runs them, with the engine deciding and the writer performing side effects."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson

from hami_fast import annotations as keys
from hami_fast._native import Cluster, EngineError, FilterDecision, parse_binding_args
from hami_fast._native import is_pod_group_member as native_pod_group_member
from hami_fast.config import Config
from hami_fast.kube import deadline
from hami_fast.kube.errors import NotFound
from hami_fast.kube.lease import Leadership, NotLeading
from hami_fast.kube.nodelock import LockContention, NodeLocker
from hami_fast.kube.stamplock import StampLocker
from hami_fast.kube.writer import Writer, patch_unbound_pod
from hami_fast.server.bindlocks import BindLocks
from hami_fast.server.bindqueue import BindJob, BindQueue
from hami_fast.server.metrics import Metrics
from hami_fast.server.router import Answer, Then, settle

log = logging.getLogger("hami_fast.scheduler")


# Filter answers kept for their Bind; kube-scheduler binds within seconds of Filter, or filters again.
ALLOCATION_TTL = 600.0
MAX_ALLOCATIONS = 200_000
# A failed Bind releases its node lock within this, then answers with this much to spare.
RELEASE_BUDGET = 1.5
ANSWER_MARGIN = 0.5


def filter_error(message: str) -> bytes:
    return orjson.dumps(
        {"Nodes": None, "NodeNames": None, "FailedNodes": None, "FailedAndUnresolvableNodes": None, "Error": message}
    )


def bind_result(error: str = "") -> bytes:
    return orjson.dumps({"Error": error})


def _resolved(answer: bytes) -> Future[bytes]:
    future: Future[bytes] = Future()
    future.set_result(answer)
    return future


# The --allocation-write modes whose Filter writes the allocation (the others write it at Bind).
WRITTEN_AT_FILTER = ("filter", "behind-answer")


class AllocationNotWritten(Exception):
    """Filter's annotation patch for this pod failed: binding it would hand the device plugin nothing."""


class NoAllocation(Exception):
    """The Bind guard: this process holds no allocation for the pod on that node and the pod carries
    none, so binding it would hand the device plugin nothing (e.g. Filter answered before a restart)."""


@dataclass
class Allocation:
    """What Filter decided for a pod, kept until its Bind."""

    node: str
    patch: bytes  # Filter's annotation merge patch (HAMi's keys)
    pod_group: bool  # a PodGroup member (HAMi's IsPodGroupMember, read by the engine)
    written: bool  # the patch is on the API server (or on its way there, behind the answer)
    resource_version: str = ""  # the pod's, as Filter saw it: its Bind events name it, as HAMi's lister pod does
    at: float = field(default_factory=time.monotonic)
    locks: list[str] = field(default_factory=lambda: [keys.NODE_LOCK])  # the node locks its Bind takes


def pod_ref(d: FilterDecision) -> dict[str, Any]:
    """The decision's pod as events and patches name it."""
    return {"namespace": d.namespace, "name": d.name, "uid": d.uid, "resourceVersion": d.resource_version}


def is_pod_group_member(pod: dict[str, Any]) -> bool:
    """HAMi's `IsPodGroupMember` on a pod object read at Bind, by the engine's own check (the one
    it applies to Filter's pod)."""
    return native_pod_group_member(orjson.dumps(pod))


def with_bind_phase(patch: bytes | None, now: int) -> dict[str, Any]:
    """The metadata Bind writes: `bind-phase: allocating` and `bind-time`, with Filter's annotations
    and label (its merge patch) in the same write when given."""
    meta: dict[str, Any] = orjson.loads(patch)["metadata"] if patch else {}
    meta.setdefault("annotations", {}).update({keys.BIND_PHASE: "allocating", keys.BIND_TIME: str(now)})
    return meta


@dataclass
class PendingBind:
    namespace: str
    name: str
    uid: str
    node: str
    job: BindJob | None = None
    looked_up: bool = False
    allocation: Allocation | None = None
    resource_version: str = ""  # of the pod as last seen (Filter's, or the one read at Bind)
    locks: list[str] = field(default_factory=list)  # the node locks its Bind takes, in HAMi's order

    @property
    def ref(self) -> dict[str, str]:
        """The pod as its Bind events name it (HAMi records them on its lister's pod)."""
        return {
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "resourceVersion": self.resource_version,
        }


class Scheduler:
    def __init__(
        self,
        config: Config,
        cluster: Cluster,
        writer: Writer,
        emit: Callable[[dict[str, Any], str, str, str, str], None],
        metrics: Metrics,
        synced: threading.Event,
        leading: Leadership,
        before_patch: Callable[[str, str, str], None] | None = None,  # (namespace, name, uid) before a pod write
    ) -> None:
        self.config, self.cluster, self.writer, self.emit, self.metrics = config, cluster, writer, emit, metrics
        self.synced, self.leading = synced, leading
        self.locker = NodeLocker(writer, config.node_lock_timeout)
        stamps = {key: StampLocker(writer, key, expiry) for key, expiry in cluster.stamp_locks()}
        self.locks = BindLocks(self.locker, stamps)
        # More binds in flight than the client's QPS only queue on its rate limiter.
        workers = (
            config.bind_workers if config.kube_qps <= 0 else max(4, min(config.bind_workers, int(config.kube_qps)))
        )
        self.binds = BindQueue(workers=workers, on_done=lambda job, waited: metrics.bind_wait.observe(waited))
        self.before_patch = before_patch
        # When Filter's annotations are written (--allocation-write): `binding` (default) in the binding
        # itself (one write at Bind: the API server copies its annotations and, from Kubernetes 1.35,
        # its labels onto the pod); `bind` in one pod patch with bind-phase at Bind, before the binding;
        # `filter` before Filter answers, as HAMi does;
        # `behind-answer` right behind Filter's answer, one single-thread lane per pod hash keeping each
        # pod's patches in order. In-memory writers (a snapshot, the demo) have no API server to
        # wait for: `behind-answer` is `bind` there (one write at Bind).
        mode = "behind-answer" if config.filter_patch_behind_answer else config.allocation_write
        self.mode = mode if getattr(writer, "blocking", True) or mode != "behind-answer" else "bind"
        self.patchers = (
            [ThreadPoolExecutor(1, thread_name_prefix=f"annotate-{i}") for i in range(8)]
            if self.mode == "behind-answer"
            else None
        )
        self._patches: dict[str, Future[str]] = {}
        self._patch_guard = threading.Lock()
        self._allocations: OrderedDict[str, Allocation] = OrderedDict()
        self._scheduled = metrics.filter_results.labels("scheduled")  # labels() takes a lock per call

    def close(self) -> None:
        self.binds.stop()
        for lane in self.patchers or []:
            lane.shutdown(wait=False, cancel_futures=True)

    def ready(self) -> bool:
        return self.synced.is_set() and self.leading.is_set()

    def _event(self, pod: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        if event_type == "Normal" and not self.config.success_events:
            return
        self.emit(pod, event_type, reason, message, self.config.scheduler_name)

    def filter(self, body: bytes, wait: float = 25.0) -> bytes:
        """Filter's answer, its bookkeeping done (see `filter_answer` for the router's split)."""
        reply = settle(self.filter_answer(body, wait))
        assert isinstance(reply, bytes), "Filter answers with a body only, never a status"
        return reply

    def filter_answer(self, body: bytes, wait: float = 25.0) -> Answer:
        """Filter's answer, and (as `Then`) the bookkeeping that can follow it: metrics, events, the
        allocation held for Bind. What the answer itself depends on (the engine's reservation, the
        annotation patch when it is written at Filter) is done before."""
        started = time.perf_counter()
        try:
            if not self.leading.is_set():
                self.metrics.filter_results.labels("not_leader").inc()
                return filter_error("hami-fast is not the leader: this replica does not schedule")
            if not self.synced.is_set() and not self.synced.wait(wait):  # is_set: no Condition lock once synced
                self.metrics.filter_results.labels("not_synced").inc()
                return filter_error("context cancelled: caches not synced")
            decision = self.cluster.decide(body, int(time.time()))
            if decision.node is None and decision.outcome != "unschedulable":
                self.metrics.filter_results.labels(decision.outcome).inc()
                return decision.response
            patch = decision.patch if self.mode == "filter" else None
            if patch is not None:  # patch before answering, as HAMi does
                error = self._write_allocation(pod_ref(decision), patch, decision.pod_key)
                if error:
                    self.metrics.count_failed_reasons(decision.reason_counts)
                    return filter_error(error)
            return Then(decision.response, lambda: self._commit(decision))
        finally:
            self.metrics.latency.observe("filter", time.perf_counter() - started)

    def _commit(self, d: FilterDecision) -> None:
        """A decision's bookkeeping, after its answer: counters, events, the allocation for Bind."""
        pod = pod_ref(d)
        reasons = d.reason_counts
        if reasons:
            self.metrics.count_failed_reasons(reasons)
        # Each FilterDecision attribute read builds a new Python object: read each once.
        node, patch, key = d.node, d.patch, d.pod_key
        scheduled = node is not None and patch is not None
        if node is None or patch is None:
            self._forget_allocation(key)
            self.metrics.filter_results.labels("unschedulable").inc()
        else:
            if self.mode == "behind-answer":
                self._queue_allocation(pod, patch, key)
            allocation = Allocation(
                node, patch, d.pod_group, self.mode in WRITTEN_AT_FILTER, pod["resourceVersion"], locks=d.locks
            )
            self._hold_allocation(key, allocation)
            self._scheduled.inc()
        for event_type, reason, message in d.events:
            self._event(pod, event_type, reason, message)
        if not scheduled:
            log.info("no node fits", extra={"pod": f"{d.namespace}/{d.name}", "reasons": reasons})
        elif log.isEnabledFor(logging.DEBUG):
            log.debug("filter chose node", extra={"pod": f"{d.namespace}/{d.name}", "node": node, "devices": d.devices})

    # -- Filter's answers, held for their Bind -------------------------------------------------
    def _hold_allocation(self, key: str, allocation: Allocation) -> None:
        with self._patch_guard:
            self._allocations.pop(key, None)
            self._allocations[key] = allocation
            stale = allocation.at - ALLOCATION_TTL
            while self._allocations and (
                len(self._allocations) > MAX_ALLOCATIONS or next(iter(self._allocations.values())).at < stale
            ):
                self._allocations.popitem(last=False)

    def _held_allocation(self, key: str) -> Allocation | None:
        with self._patch_guard:
            return self._allocations.get(key)

    def _forget_allocation(self, key: str, allocation: Allocation | None = None) -> None:
        """Drop the held answer (only `allocation` itself when given: a newer Filter may have replaced it)."""
        with self._patch_guard:
            if allocation is None or self._allocations.get(key) is allocation:
                self._allocations.pop(key, None)

    def _write_allocation(self, pod: dict[str, Any], patch: bytes, key: str) -> str:
        """Patch the pod with Filter's annotations; on failure roll the reservation back. Returns the error."""
        try:
            if self.before_patch:
                self.before_patch(pod["namespace"], pod["name"], pod["uid"])
            metadata = orjson.loads(patch)["metadata"]
            patch_unbound_pod(self.writer, pod["namespace"], pod["name"], metadata, pod["resourceVersion"])
            return ""
        except Exception as exc:
            with self._patch_guard:
                latest = self._patches.get(key)
            if latest is None or latest.running():  # a newer Filter of this pod owns the reservation otherwise
                self.cluster.release(key)
                self._forget_allocation(key)
            self.metrics.filter_results.labels("patch_failed").inc()
            message = f"patch pod annotations: {exc}"
            self._event(pod, "Warning", "FilteringFailed", message)
            log.warning(
                "filter patch failed, reservation rolled back",
                extra={"pod": f"{pod['namespace']}/{pod['name']}", "error": str(exc)},
            )
            return message

    def _queue_allocation(self, pod: dict[str, Any], patch: bytes, key: str) -> None:
        """Filter answers as soon as the engine has reserved; the annotations are written behind it,
        in order per pod, and Bind waits for them (HAMi's device plugin reads them only after Bind)."""
        assert self.patchers is not None
        future = self.patchers[hash(key) % len(self.patchers)].submit(self._write_allocation, pod, patch, key)
        with self._patch_guard:
            self._patches[key] = future
        future.add_done_callback(lambda done: self._forget_patch(key, done))

    def _forget_patch(self, key: str, done: Future[str]) -> None:
        if done.result() == "":
            with self._patch_guard:
                if self._patches.get(key) is done:
                    del self._patches[key]

    def _allocation_written(self, key: str, timeout: float) -> str:
        """Wait for Filter's annotation patch of this pod, if one is still in flight; returns its error."""
        with self._patch_guard:
            future = self._patches.pop(key, None)
        if future is None:
            return ""
        try:
            return future.result(timeout=max(0.1, timeout))
        except TimeoutError:
            return "patch pod annotations: still in flight at the bind deadline"

    def submit_bind(self, body: bytes) -> Future[bytes]:
        """Queue the bind behind earlier binds to the same node; the Future resolves to the extender's answer."""
        started = time.perf_counter()
        try:
            name, namespace, uid, node = parse_binding_args(body)
        except EngineError as exc:
            self.metrics.bind_results.labels("bad_request").inc()
            return _resolved(bind_result(str(exc)))
        pending = PendingBind(namespace, name, uid, node)
        pending.job = BindJob.within(
            node,
            lambda: self._bind_attempt(pending),
            lambda exc: self._bind_failed(pending, exc),
            self.config.bind_wait_timeout,
        )
        future = self.binds.submit(pending.job)
        future.add_done_callback(lambda _: self.metrics.latency.observe("bind", time.perf_counter() - started))
        return future

    def bind(self, body: bytes) -> bytes:
        return self.submit_bind(body).result()

    def _bind_attempt(self, pending: PendingBind) -> bytes:
        """One try: LockContention (nothing written) while another pod holds the lock, else the answer."""
        namespace, name, uid, node = pending.namespace, pending.name, pending.uid, pending.node
        key = uid or f"{namespace}/{name}"
        locked = False
        try:
            with deadline.answer_by(self._writes_deadline(pending)):
                if not pending.looked_up:
                    self._look_up(pending, key)
                allocation = pending.allocation
                if pending.job and not self.binds.commit(pending.job):
                    raise LockContention(f"node {node}: bind answered at its deadline, not attempted")
                self._require_leading()
                self.locks.take(node, namespace, name, pending.locks)
                locked = True
                self._write_binding(pending, allocation)
        except LockContention:
            raise
        except Exception as exc:
            if isinstance(exc, NotFound) and str(exc).startswith("pod "):
                self.cluster.release(uid)
                self._forget_allocation(key)
            if locked and not isinstance(exc, NotLeading):  # the next leader may hold this pod's lock now
                with deadline.answer_by(time.monotonic() + RELEASE_BUDGET):
                    self.locks.release_after_failure(node, namespace, name, pending.locks)
            return self._bind_failed(pending, exc)
        if pending.allocation is not None:
            self._forget_allocation(key, pending.allocation)
        self.metrics.bind_results.labels("bound").inc()
        self._event(
            pending.ref, "Normal", "BindingSucceed", f"Successfully binding node [{node}] to {namespace}/{name}"
        )
        log.info("bound", extra={"pod": f"{namespace}/{name}", "node": node})
        return bind_result()

    def _write_binding(self, pending: PendingBind, allocation: Allocation | None) -> None:
        """The pod's annotations (with bind-phase), then the binding, or both in the binding itself
        (`--allocation-write binding`); the node lock is held."""
        namespace, name = pending.namespace, pending.name
        unwritten = allocation if allocation is not None and not allocation.written else None
        metadata = with_bind_phase(unwritten.patch if unwritten is not None else None, int(time.time()))
        if self.before_patch:
            self.before_patch(namespace, name, pending.uid)
        self._require_leading()
        if self.mode == "binding":  # the API server copies the Binding's annotations and labels onto the pod
            self.writer.bind(namespace, name, pending.uid, pending.node, metadata)
            return
        if unwritten is not None:
            patch_unbound_pod(self.writer, namespace, name, metadata, pending.resource_version)
            unwritten.written = True
        else:
            self.writer.patch_pod(namespace, name, orjson.dumps({"metadata": metadata}))
        self._require_leading()
        self.writer.bind(namespace, name, pending.uid, pending.node)

    def _writes_deadline(self, pending: PendingBind) -> float:
        """When a Bind's writes stop retrying: early enough that its answer (after releasing the lock
        of a failed one) reaches kube-scheduler inside its httpTimeout (`--bind-timeout`)."""
        started = pending.job.enqueued if pending.job else time.monotonic()
        return started + self.config.bind_timeout - RELEASE_BUDGET - ANSWER_MARGIN

    def _look_up(self, pending: PendingBind, key: str) -> None:
        """The Bind guard, once per bind: the allocation Filter made for this pod on this node (its
        annotations written, or to be written with bind-phase), else annotations already on the pod.
        Raises NoAllocation or AllocationNotWritten; extends a PodGroup member's wait."""
        namespace, name, node = pending.namespace, pending.name, pending.node
        error = self._allocation_written(key, self.config.bind_wait_timeout)
        if error:
            raise AllocationNotWritten(error)
        allocation = self._held_allocation(key)
        if allocation is not None and allocation.node != node:
            raise NoAllocation(
                f"pod {namespace}/{name}: hami-fast allocated it on node {allocation.node}, not {node}: not binding"
            )
        if allocation is not None:
            pod_group = allocation.pod_group
            pending.resource_version = allocation.resource_version
            pending.locks = allocation.locks
        else:  # no Filter of this process (a restart since, or another scheduler's): read the pod itself
            pod = self.writer.get_pod(namespace, name)
            meta = pod.get("metadata") or {}
            annotations = meta.get("annotations") or {}
            if annotations.get(keys.VGPU_NODE) != node or not any(map(keys.is_allocation_key, annotations)):
                raise NoAllocation(
                    f"pod {namespace}/{name}: hami-fast holds no allocation for it on node {node} and the pod "
                    f"has no {keys.VGPU_NODE}/{keys.ALLOCATED} annotations for that node (filtered before a restart?): "
                    "not binding it without one; it will be scheduled again"
                )
            pod_group = is_pod_group_member(pod)
            pending.resource_version = meta.get("resourceVersion") or ""
            pending.locks = self.cluster.bind_locks(orjson.dumps(pod))
        pending.allocation, pending.looked_up = allocation, True
        if pod_group and pending.job:
            # HAMi retries a PodGroup member's lock for node_lock_retry_timeout: never wait less.
            retry_until = pending.job.enqueued + self.config.node_lock_retry_timeout
            pending.job.deadline = max(pending.job.deadline, retry_until)

    def _require_leading(self) -> None:
        """Before each write of a Bind: a replica whose term ended (even while it was paused) writes nothing more."""
        if not self.leading.is_set():
            raise NotLeading("hami-fast is not the leader: this replica does not bind")

    def _bind_failed(self, pending: PendingBind, exc: Exception) -> bytes:
        if isinstance(exc, NotLeading):  # no event either: the leader may be writing this pod's
            self.metrics.bind_results.labels("not_leader").inc()
            log.warning("bind refused", extra={"pod": f"{pending.namespace}/{pending.name}", "error": str(exc)})
            return bind_result(str(exc))
        self.metrics.bind_results.labels("contention" if isinstance(exc, LockContention) else "failed").inc()
        self._event(pending.ref, "Warning", "BindingFailed", str(exc))
        log.warning(
            "bind failed", extra={"pod": f"{pending.namespace}/{pending.name}", "node": pending.node, "error": str(exc)}
        )
        return bind_result(str(exc))

    def admit(self, body: bytes) -> bytes:
        with self.metrics.time("webhook"):
            answer, allowed = self.cluster.review(body)
            self.metrics.webhook_results.labels("allowed" if allowed else "denied").inc()
            return answer

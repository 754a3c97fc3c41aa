"""HamiPodPlacement controller: validate the target, evict the old pod through the Eviction API,
wait for the pinned replacement to bind, and keep `status` (phase, conditions) current at each step.

Event-driven: two informers (list once, then watch; `descheduler/cache.py`) keep the placements and
the hami-scheduler pods in memory. A change of a placement, or of a pod it names (its `evictPod`,
or the pod its pin landed on), queues that placement; backoffs and deadlines queue it for later;
a periodic resync queues every placement as a safety net.

All state that matters lives in the placement's status, so a restarted controller resumes where
the previous one stopped (an evicted pod is never evicted twice). Phases and conditions:
`descheduler/status.py`.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import orjson

from hami_fast import annotations as keys
from hami_fast.descheduler import kube as k
from hami_fast.descheduler import status as s
from hami_fast.descheduler.cache import Informer, pinned_by, placement_informer, pod_informer
from hami_fast.descheduler.metrics import DeschedulerMetrics
from hami_fast.descheduler.status import expired
from hami_fast.descheduler.status import stamp_age as _age
from hami_fast.descheduler.view import ClusterView
from hami_fast.descheduler.webhook import labels_match
from hami_fast.kube.client import KubeClient
from hami_fast.kube.errors import ApiError, Conflict, NotFound
from hami_fast.kube.lease import Leadership

log = logging.getLogger("hami_fast.descheduler.controller")

DEFAULT_TTL = 3600.0


@dataclass
class Timeouts:
    eviction: float = 300.0  # a disruption budget may block this long before Failed
    replacement: float = 600.0  # old pod gone -> pinned replacement created
    bind: float = 900.0  # replacement created -> bound on the target
    backoff_min: float = 1.0
    backoff_max: float = 30.0
    max_in_flight: int = 2  # evictions whose replacement has not completed yet, cluster-wide
    ttl: float = DEFAULT_TTL  # a Pending placement no pod consumed expires this long after creation; 0: never
    resync: float = 30.0  # every placement is reconciled at least this often

    def expiry_margin(self) -> float:
        """An eviction starts only this long before the TTL at the latest, so the replacement's
        admission (a few milliseconds later) never meets an expired pin."""
        return min(30.0, self.ttl / 10)


def controller_owner(pod: dict[str, Any]) -> dict[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


class WorkQueue:
    """Placement keys to reconcile, each queued at most once; `add_after` for backoffs and deadlines."""

    def __init__(self) -> None:
        self._ready: dict[str, None] = {}
        self._later: list[tuple[float, str]] = []
        self._due: dict[str, float] = {}  # the earliest pending `add_after` per key (older heap entries are stale)
        self._cond = threading.Condition()

    def add(self, key: str) -> None:
        with self._cond:
            self._ready[key] = None
            self._cond.notify()

    def add_after(self, key: str, delay: float) -> None:
        due = time.monotonic() + max(0.0, delay)
        with self._cond:
            if key in self._due and self._due[key] <= due:
                return
            self._due[key] = due
            heapq.heappush(self._later, (due, key))
            self._cond.notify()

    def get(self, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                while self._later and self._later[0][0] <= now:
                    due, key = heapq.heappop(self._later)
                    if self._due.get(key) == due:
                        del self._due[key]
                        self._ready[key] = None
                if self._ready:
                    key = next(iter(self._ready))
                    del self._ready[key]
                    return key
                wait = deadline - now
                if self._later:
                    wait = min(wait, self._later[0][0] - now)
                if deadline <= now:
                    return None
                self._cond.wait(max(wait, 0.001))

    def __len__(self) -> int:
        return len(self._ready)


REASONS = {
    s.PENDING: ("Normal", "TargetValidated"),
    s.DELETING: ("Normal", "Evicted"),
    s.COMPLETED: ("Normal", "Completed"),
    s.PARTIAL: ("Normal", "PartiallyCompleted"),
    s.FAILED: ("Warning", "Failed"),
}


def allocated_devices(annotations: dict[str, str]) -> set[str]:
    """The devices a bound pod was given, every backend's: the UUIDs of HAMi's `hami.io/...-allocated`
    lists (`uuid,type,mem,cores:` per device, `;` between containers)."""
    lists = [v for key, v in annotations.items() if k.is_allocation_list(key)]
    return {entry.split(",")[0] for value in lists for slot in value.split(";") for entry in slot.split(":") if entry}


class Controller:
    def __init__(
        self,
        client: KubeClient,
        timeouts: Timeouts | None = None,
        dry_run: bool = False,
        config: bytes | None = None,
        scheduler_name: str = k.SCHEDULER_NAME,
        metrics: DeschedulerMetrics | None = None,
        stop: threading.Event | None = None,
        placements: Informer | None = None,
        view: ClusterView | None = None,
    ) -> None:
        self.client, self.timeouts, self.dry_run, self.config = client, timeouts or Timeouts(), dry_run, config
        self.scheduler_name = scheduler_name
        self.stop = stop or threading.Event()
        self.placements = placements or placement_informer(client, self.stop)
        self.pods = pod_informer(client, self.stop, scheduler_name)
        self.view = view or ClusterView.watching(client, self.stop, config)
        self.metrics = metrics or DeschedulerMetrics(self.placements.store, self.pods.store)
        self.queue = WorkQueue()
        self.next_attempt: dict[str, float] = {}
        # uid -> monotonic time of the first eviction attempt / of the accepted eviction (latency metrics;
        # after a restart they are derived from the status stamps, to the second)
        self.first_attempt: dict[str, float] = {}
        self.evicted: dict[str, float] = {}
        self.leading: Any = lambda: True  # the loop sets its leader check: only the leader counts moves
        self.placements.store.listeners.append(self._placement_changed)
        self.pods.store.listeners.append(self._pod_changed)

    # -- events --------------------------------------------------------------------------------

    def _placement_changed(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            uid = (old or {}).get("metadata", {}).get("uid", "")
            self.next_attempt.pop(uid, None)
            self.first_attempt.pop(uid, None)
            self.evicted.pop(uid, None)
            return
        self.queue.add(key)
        was = ((old or {}).get("status") or {}).get("phase")
        status = new.get("status") or {}
        if status.get("phase") in s.FINAL and was not in s.FINAL:
            # Whoever wrote it (this controller, or a webhook failing a target at admission).
            if old is not None and self.leading():
                self.metrics.moved(s.result_of(status))
            self.queue_waiting()  # a move ended: one waiting on the pacing limit may start

    def _pod_changed(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for pod in (old, new):
            stamp = pinned_by(pod) if pod else ""
            if stamp:
                self.queue.add(stamp)
        for placement_key in self.placements.store.indexed_keys(key):
            self.queue.add(placement_key)

    def queue_all(self) -> None:
        for key in self.placements.store.keys():
            self.queue.add(key)

    def queue_waiting(self) -> None:
        waiting = self.placements.store.select(
            lambda p: (p.get("status") or {}).get("phase") == s.PENDING and bool((p.get("spec") or {}).get("evictPod"))
        )
        for p in waiting:
            self.queue.add(self._key(p))

    def start_informers(self) -> None:
        self.placements.start()
        self.pods.start()
        self.view.start()

    def synced(self) -> bool:
        return self.placements.synced() and self.pods.synced() and self.view.synced()

    # -- status helpers ----------------------------------------------------------------------

    def event(self, placement: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        """An audit Event on the placement (best effort: a failed post never stops a move)."""
        meta = placement["metadata"]
        stamp = k.now_rfc3339()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": f"{k.GROUP}/{k.VERSION}",
                "kind": "HamiPodPlacement",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta.get("uid", ""),
            },
            "type": event_type,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": "hami-gpu-descheduler"},
            "reportingComponent": "hami-gpu-descheduler",
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self.client.request("POST", f"/api/v1/namespaces/{meta['namespace']}/events", body=orjson.dumps(body))
        except ApiError as exc:
            log.debug("event not posted: %s", exc)

    def _write(
        self, placement: dict[str, Any], condition: s.Condition | None = None, **changes: Any
    ) -> dict[str, Any] | None:
        """One status write through the status subresource, guarded by the cached resourceVersion;
        a phase change the state machine does not allow is refused (logged, nothing written)."""
        try:
            s.check_transition(placement, changes.get("phase"))
        except s.IllegalTransition as exc:
            log.error("%s", exc)
            return None
        status = placement.setdefault("status", {})
        generation = int(placement["metadata"].get("generation") or 1)
        old_phase, new_phase = status.get("phase"), changes.get("phase")
        status.update(changes)
        status.setdefault("observedGeneration", generation)
        if condition:
            s.set_condition(status, generation, condition)
        try:
            written = k.put_status(self.client, placement)
        except (NotFound, Conflict):  # deleted, or changed under us: the watch brings the new one
            return None
        self.placements.store.put(written)
        if new_phase and new_phase != old_phase:
            event_type, reason = REASONS[new_phase]
            if new_phase == s.FAILED and condition:
                reason = condition[2]
            self.event(placement, event_type, reason, str(changes.get("message", "")))
        return written

    def fail(self, placement: dict[str, Any], condition: s.Condition) -> None:
        message = condition[3]
        log.info("placement failed", extra={"placement": self._key(placement), "reason": message})
        self._write(placement, condition, phase=s.FAILED, message=message)

    @staticmethod
    def _key(placement: dict[str, Any]) -> str:
        return f"{placement['metadata']['namespace']}/{placement['metadata']['name']}"

    # -- reconcile -----------------------------------------------------------------------------

    def reconcile_all(self) -> None:
        """Every placement once. Without running informers (one-shot use, tests) it re-lists first."""
        if not self.placements.started:
            self.placements.relist()
            self.pods.relist()
            self.view.relist()
        for placement in self.placements.store.items():
            try:
                self.reconcile(placement)
            except ApiError as exc:
                log.warning("reconcile %s: %s", self._key(placement), exc)

    def reconcile_key(self, key: str) -> None:
        placement = self.placements.store.get(key)
        if placement is not None:
            self.reconcile(placement)

    def reconcile(self, placement: dict[str, Any]) -> None:
        phase = (placement.get("status") or {}).get("phase")
        if phase in s.FINAL:
            return
        if not phase or (phase == s.PENDING and s.spec_changed(placement)):
            self.validate(placement)  # new, or its spec changed since validation (e.g. evictPod added)
        elif phase == s.PENDING:
            self.pending(placement)
        elif phase == s.DELETING:
            self.deleting(placement)

    def _target_check(self, placement: dict[str, Any], pod: dict[str, Any] | None) -> dict[str, Any]:
        """The target checked on the watched view, with the evictee and the target node just read."""
        spec = placement.get("spec") or {}
        node_name = spec.get("nodeName", "")
        node = k.get_node(self.client, node_name) if node_name else None
        self.view.refresh(*(orjson.dumps(o) for o in (pod, node) if o is not None))
        pod_key = f"{placement['metadata']['namespace']}/{spec['evictPod']}" if spec.get("evictPod") else ""
        return orjson.loads(self.view.validate_target(pod_key, node_name, list(spec.get("gpuDevices") or [])))

    def validate(self, placement: dict[str, Any]) -> None:
        spec = placement.get("spec") or {}
        meta = placement["metadata"]
        if not ((spec.get("podSelector") or {}).get("matchLabels")):
            message = "spec.podSelector.matchLabels is empty: it would match every pod in the namespace"
            return self.fail(placement, (s.VALIDATED, False, s.INVALID_SPEC, message))
        req_id = spec.get("reqID")
        for other in self.placements.store.items():
            o_meta, o_status = other["metadata"], other.get("status") or {}
            if o_meta.get("uid") == meta.get("uid") or (other.get("spec") or {}).get("reqID") != req_id:
                continue
            if o_status.get("phase") in (s.PENDING, s.DELETING, s.PARTIAL, s.COMPLETED):
                message = f"spec.reqID {req_id!r} was already executed by {o_meta['namespace']}/{o_meta['name']}"
                return self.fail(placement, (s.VALIDATED, False, s.DUPLICATE_REQ_ID, message))
        evictee = spec.get("evictPod") or ""
        pod_key = f"{meta['namespace']}/{evictee}" if evictee else ""
        pod = k.get_pod(self.client, meta["namespace"], evictee) if evictee else None
        if evictee:
            problem = self.evictee_problem(placement, pod)
            if problem:
                return self.fail(placement, (s.VALIDATED, False, s.INVALID_EVICTEE, problem))
        result = self._target_check(placement, pod)
        if not result["ok"]:
            message = f"{result['field']}: invalid target: {result['message']}"
            return self.fail(placement, (s.VALIDATED, False, s.INVALID_TARGET, message))
        checked = f"node {spec.get('nodeName')} GPUs {result['uuids']} checked" + (f" for {pod_key}" if pod_key else "")
        self._write(
            placement,
            (s.VALIDATED, True, s.TARGET_VALID, checked),
            phase=s.PENDING,
            message="target validated",
            resolvedUUIDs=result["uuids"],
            pinAnnotations=result["pin"],
            validatedAt=k.now_rfc3339(),
            observedGeneration=int(meta.get("generation") or 1),
        )

    def _expire(self, placement: dict[str, Any]) -> None:
        ttl = self.timeouts.ttl
        spec = placement.get("spec") or {}
        waited = (
            f"evictPod {spec['evictPod']} was not evicted" if spec.get("evictPod") else "no matching pod was created"
        )
        message = (
            f"expired: not consumed within the placement TTL ({ttl:.0f}s, --placement-ttl) after creation; "
            f"{waited}; the pin no longer applies"
        )
        self.fail(placement, (s.CLAIMED, False, s.EXPIRED, message))

    def _requeue_for_ttl(self, placement: dict[str, Any], margin: float = 0.0) -> None:
        if self.timeouts.ttl > 0:
            left = self.timeouts.ttl - margin - _age(placement["metadata"].get("creationTimestamp"))
            self.queue.add_after(self._key(placement), left + 1.0)

    def in_flight(self) -> list[dict[str, Any]]:
        return self.placements.store.select(lambda p: (p.get("status") or {}).get("phase") == s.DELETING)

    def pending(self, placement: dict[str, Any]) -> None:
        spec, status = placement.get("spec") or {}, placement.get("status") or {}
        passive = not spec.get("evictPod")
        if not status.get("claimedBy"):
            margin = 0.0 if passive else self.timeouts.expiry_margin()
            if expired(placement, self.timeouts.ttl, margin):
                return self._expire(placement)
            self._requeue_for_ttl(placement, margin)
        if status.get("claimedBy") or passive:
            # Passive placement (or a pod was pinned before any eviction): wait for the pinned pod.
            return self.watch_replacement(placement)
        if self.dry_run:
            return
        uid = placement["metadata"].get("uid", "")
        wait = self.next_attempt.get(uid, 0.0) - time.monotonic()
        if wait > 0:
            return self.queue.add_after(self._key(placement), wait)
        namespace, name = placement["metadata"]["namespace"], spec["evictPod"]
        # Pacing: a bounded number of moves at once, and never two of one workload (same selector).
        selector = (spec.get("podSelector") or {}).get("matchLabels")
        in_flight = self.in_flight()
        same = [
            p
            for p in in_flight
            if p["metadata"]["namespace"] == namespace
            and ((p.get("spec") or {}).get("podSelector") or {}).get("matchLabels") == selector
        ]
        if same or len(in_flight) >= self.timeouts.max_in_flight:
            why = (
                f"waiting: {same[0]['metadata']['name']} moves the same workload"
                if same
                else f"waiting: {len(in_flight)} moves in flight (max {self.timeouts.max_in_flight})"
            )
            if status.get("message") != why:
                self._write(placement, message=why)
            return
        pod = k.get_pod(self.client, namespace, name)
        if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            gone = "already gone" if pod is None else "already terminating"
            self._write(
                placement,
                (s.EVICTION, True, s.ALREADY_GONE, f"pod {name} {gone} before the eviction"),
                phase=s.DELETING,
                message=f"pod {name} {gone}; waiting for the replacement",
                evictedAt=k.now_rfc3339(),
                evictedUID=(pod or {}).get("metadata", {}).get("uid", ""),
            )
            return
        problem = self.evictee_problem(placement, pod)
        if problem:
            return self.fail(placement, (s.VALIDATED, False, s.INVALID_EVICTEE, problem))
        # Re-check the target right before evicting: the cluster may have moved since validation.
        result = self._target_check(placement, pod)
        if not result["ok"]:
            message = f"{result['field']}: target no longer valid: {result['message']}; nothing was evicted"
            return self.fail(placement, (s.VALIDATED, False, s.TARGET_GONE, message))
        self.evict(placement, pod)

    def evict(self, placement: dict[str, Any], pod: dict[str, Any]) -> None:
        spec, status = placement.get("spec") or {}, placement.get("status") or {}
        namespace, name = placement["metadata"]["namespace"], spec["evictPod"]
        uid = placement["metadata"].get("uid", "")
        first = status.get("firstEvictionAttempt") or k.now_rfc3339()
        self.first_attempt.setdefault(uid, time.monotonic() - _age(status.get("firstEvictionAttempt")))
        code = k.evict(self.client, namespace, name)
        attempts = int(status.get("evictionAttempts") or 0) + 1
        if code == 429:
            if _age(first) > self.timeouts.eviction:
                message = (
                    f"spec.evictPod: eviction of {namespace}/{name} blocked by a PodDisruptionBudget for "
                    f"{self.timeouts.eviction:.0f}s; nothing was evicted"
                )
                self.first_attempt.pop(uid, None)
                return self.fail(placement, (s.EVICTION, False, s.EVICTION_TIMEOUT, message))
            delay = min(self.timeouts.backoff_max, self.timeouts.backoff_min * 2 ** min(attempts - 1, 10))
            self.next_attempt[uid] = time.monotonic() + delay
            self.queue.add_after(self._key(placement), delay)
            if attempts == 1:
                self.event(
                    placement,
                    "Warning",
                    "EvictionBlocked",
                    f"eviction of {namespace}/{name} refused by a PodDisruptionBudget; retrying with backoff",
                )
            refused = (
                f"eviction of {namespace}/{name} refused (429, disruption budget); retry {attempts} in {delay:.0f}s"
            )
            self._write(
                placement,
                (s.EVICTION, False, s.DISRUPTION_BUDGET, refused),
                message=refused,
                evictionAttempts=attempts,
                firstEvictionAttempt=first,
            )
            return
        self.next_attempt.pop(uid, None)
        self.evicted[uid] = time.monotonic()
        self.metrics.eviction_seconds.observe(max(0.0, self.evicted[uid] - self.first_attempt.pop(uid)))
        self.queue.add_after(self._key(placement), self.timeouts.replacement + 1.0)
        self._write(
            placement,
            (s.EVICTION, True, s.EVICTED, f"eviction of {namespace}/{name} accepted after {attempts} attempt(s)"),
            phase=s.DELETING,
            message=f"evicted {namespace}/{name}; waiting for the replacement",
            evictionAttempts=attempts,
            firstEvictionAttempt=first,
            evictedAt=k.now_rfc3339(),
            evictedUID=pod["metadata"].get("uid", ""),
        )

    def evictee_problem(self, placement: dict[str, Any], pod: dict[str, Any] | None) -> str:
        """Why `spec.evictPod` may not be evicted for this placement, or ''."""
        spec = placement.get("spec") or {}
        namespace, name = placement["metadata"]["namespace"], spec.get("evictPod", "")
        what = f"spec.evictPod: pod {namespace}/{name}"
        if pod is None:
            return f"{what} not found"
        selector = (spec.get("podSelector") or {}).get("matchLabels") or {}
        if not labels_match(spec.get("podSelector"), (pod.get("metadata") or {}).get("labels") or {}):
            return f"{what} does not match spec.podSelector (matchLabels {selector})"
        owner = controller_owner(pod)
        if owner is None:
            return f"{what} is a bare pod (no controller owner): it would not be recreated, so it is not evicted"
        if owner.get("kind") in ("DaemonSet", "Node"):
            return f"{what} is a {owner['kind']} pod and is not evicted"
        if (pod.get("spec") or {}).get("schedulerName") != self.scheduler_name:
            return f"{what} does not use schedulerName {self.scheduler_name}: its replacement would not be pinned"
        return ""

    def deleting(self, placement: dict[str, Any]) -> None:
        status = placement.get("status") or {}
        if not status.get("claimedBy"):
            waited = _age(status.get("evictedAt"))
            if waited > self.timeouts.replacement:
                message = f"no replacement pod was pinned within {self.timeouts.replacement:.0f}s after the eviction"
                return self.fail(placement, (s.REPLACEMENT, False, s.REPLACEMENT_TIMEOUT, message))
            self.queue.add_after(self._key(placement), self.timeouts.replacement - waited + 1.0)
        self.watch_replacement(placement)

    def watch_replacement(self, placement: dict[str, Any]) -> None:
        meta, spec, status = placement["metadata"], placement.get("spec") or {}, placement.get("status") or {}
        pinned = self.pods.store.indexed(self._key(placement))
        if not pinned:
            if status.get("claimedBy"):
                waited = _age(status.get("consumedAt"))
                if waited > self.timeouts.replacement:
                    message = "the placement was claimed but no pinned pod appeared (creation failed or was rejected)"
                    return self.fail(placement, (s.REPLACEMENT, False, s.REPLACEMENT_TIMEOUT, message))
                self.queue.add_after(self._key(placement), self.timeouts.replacement - waited + 1.0)
            return
        pod = pinned[0]
        pod_name = pod["metadata"]["name"]
        uuids = status.get("resolvedUUIDs") or []
        created = (s.REPLACEMENT, True, s.POD_CREATED, f"pod {pod_name} carries the pin")
        s.set_condition(placement.setdefault("status", {}), int(meta.get("generation") or 1), created)
        annotations = pod["metadata"].get("annotations") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        if annotations.get(keys.BIND_PHASE) == "failed":
            message = f"pod {pod_name} failed to bind on {spec.get('nodeName')} ({keys.BIND_PHASE}=failed)"
            return self.fail(placement, (s.SCHEDULED, False, s.BIND_FAILED, message))
        used = allocated_devices(annotations)
        if node and used:
            return self.bound(placement, pod_name, node, used)
        details = [{"podName": pod_name, "gpuDevice": u} for u in uuids]
        if status.get("assignmentDetails") != details:
            self._write(placement, assignmentDetails=details, message=f"pod {pod_name} pinned; waiting for it to bind")
        elif _age(status.get("consumedAt")) > self.timeouts.bind:
            message = f"pod {pod_name} did not bind on the target within {self.timeouts.bind:.0f}s"
            return self.fail(placement, (s.SCHEDULED, False, s.BIND_TIMEOUT, message))
        self.queue.add_after(self._key(placement), self.timeouts.bind - _age(status.get("consumedAt")) + 1.0)

    def bound(self, placement: dict[str, Any], pod_name: str, node: str, used: set[str]) -> None:
        """The pinned pod is bound: on the target node and GPUs (all of them, or some), or elsewhere."""
        spec, status = placement.get("spec") or {}, placement.get("status") or {}
        uuids = status.get("resolvedUUIDs") or []
        if node != spec.get("nodeName") or not used <= set(uuids):
            message = (
                f"pod {pod_name} landed on {node} GPUs {sorted(used)}, not on the target {spec.get('nodeName')} {uuids}"
            )
            return self.fail(placement, (s.SCHEDULED, False, s.WRONG_TARGET, message))
        details = [{"podName": pod_name, "gpuDevice": u} for u in uuids if u in used]
        unused = [u for u in uuids if u not in used]
        if unused:
            phase, reason = s.PARTIAL, s.PARTIAL_ASSIGNMENT
            message = f"pod {pod_name} runs on {node} {sorted(used)}; {unused} of spec.gpuDevices stay unassigned"
        else:
            phase, reason = s.COMPLETED, s.BOUND_ON_TARGET
            message = f"pod {pod_name} runs on {node} {sorted(used)}"
        evicted_at = status.get("evictedAt")
        written = self._write(
            placement,
            (s.SCHEDULED, True, reason, message),
            phase=phase,
            message=message,
            assignmentDetails=details,
            consumedAt=status.get("consumedAt") or k.now_rfc3339(),
        )
        if written is not None and evicted_at:
            uid = placement["metadata"].get("uid", "")
            since = self.evicted.pop(uid, None)
            self.metrics.move_seconds.observe(max(0.0, time.monotonic() - since if since else _age(evicted_at)))


class ControllerLoop(threading.Thread):
    """Starts the informers and reconciles queued placements while this replica leads; becoming
    leader, and every `period` seconds after, queues every placement (resync)."""

    def __init__(
        self, controller: Controller, leading: Leadership, stop: threading.Event, period: float | None = None
    ) -> None:
        super().__init__(name="placement-controller", daemon=True)
        self.controller, self.leading, self.stop_event = controller, leading, stop
        self.period = period if period is not None else controller.timeouts.resync

    def run(self) -> None:
        try:
            self.loop()
        finally:
            self.controller.stop.set()  # the informers end with the loop

    def loop(self) -> None:
        c = self.controller
        c.leading = self.leading.is_set
        c.start_informers()
        was_leading, next_resync = False, 0.0
        while not self.stop_event.is_set():
            if not self.leading.is_set() or not c.synced():
                was_leading = False
                self.stop_event.wait(0.1)
                continue
            now = time.monotonic()
            if not was_leading or now >= next_resync:
                c.queue_all()
                was_leading, next_resync = True, now + self.period
            key = c.queue.get(timeout=max(0.01, min(0.5, next_resync - now)))
            if key is None:
                continue
            try:
                c.reconcile_key(key)
            except ApiError as exc:
                log.warning("reconcile %s: %s", key, exc)
                c.queue.add_after(key, c.timeouts.backoff_min)
            except Exception:  # keep the loop alive; the resync retries
                log.exception("reconcile %s failed", key)

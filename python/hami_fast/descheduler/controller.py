"""HamiPodPlacement controller: validate the target, evict the old pod through the Eviction API,
wait for the pinned replacement to bind, and keep `status` (phase, conditions) current at each step.

Event-driven: two informers (list once, then watch; `descheduler/cache.py`) keep the placements and
the hami-scheduler pods in memory. A change of a placement, or of a pod it names (its `evictPod`,
or the pod its pin landed on), queues that placement; backoffs and deadlines queue it for later;
a periodic resync queues every placement as a safety net.

All state that matters lives in the placement's status, so a restarted controller resumes where
the previous one stopped (an evicted pod is never evicted twice). Phases and conditions:
`descheduler/status.py`; the placement as typed views: `descheduler/placement.py`; its writes:
`descheduler/writer.py`.
"""

from __future__ import annotations

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
from hami_fast.descheduler.config import DEFAULTS, DeschedulerConfig
from hami_fast.descheduler.evictee import allocated_devices, evictee_problem
from hami_fast.descheduler.metrics import DeschedulerMetrics
from hami_fast.descheduler.placement import Placement, StatusUpdate, assignment, stamp_age
from hami_fast.descheduler.view import ClusterView
from hami_fast.descheduler.workqueue import WorkQueue
from hami_fast.descheduler.writer import StatusWriter
from hami_fast.kube.client import KubeClient
from hami_fast.kube.errors import ApiError
from hami_fast.kube.lease import Leadership

__all__ = ["Controller", "ControllerLoop", "Timeouts", "WorkQueue"]

log = logging.getLogger("hami_fast.descheduler.controller")
# How often an unpinned replacement is looked at until it binds (its events name no placement).
UNPINNED_POLL = 2.0


@dataclass
class Timeouts:
    eviction: float = DEFAULTS.eviction_timeout  # a disruption budget may block this long before Failed
    replacement: float = DEFAULTS.replacement_timeout  # old pod gone -> pinned replacement created
    bind: float = DEFAULTS.bind_timeout  # replacement created -> bound on the target
    backoff_min: float = 1.0
    backoff_max: float = 30.0
    max_in_flight: int = DEFAULTS.max_in_flight  # evictions whose replacement has not completed yet, cluster-wide
    # A Pending placement no pod consumed expires this long after creation; 0: never.
    ttl: float = DEFAULTS.placement_ttl
    resync: float = DEFAULTS.period  # every placement is reconciled at least this often

    @classmethod
    def of(cls, config: DeschedulerConfig) -> Timeouts:
        return cls(
            eviction=config.eviction_timeout,
            replacement=config.replacement_timeout,
            bind=config.bind_timeout,
            max_in_flight=config.max_in_flight,
            ttl=config.placement_ttl,
            resync=config.period,
        )

    def expiry_margin(self) -> float:
        """An eviction starts only this long before the TTL at the latest, so the replacement's
        admission (a few milliseconds later) never meets an expired pin."""
        return min(30.0, self.ttl / 10)


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
        self.writer = StatusWriter(client, self.placements.store)
        self.queue = WorkQueue()
        self.next_attempt: dict[str, float] = {}
        # uid -> monotonic time of the first eviction attempt / of the accepted eviction (latency metrics;
        # after a restart they are derived from the status stamps, to the second)
        self.first_attempt: dict[str, float] = {}
        self.evicted: dict[str, float] = {}
        # placement uid -> names of its workload's pods when it evicted (this process only): a pod
        # created in the eviction's second is its replacement only if it was not among them
        self.workload_at_eviction: dict[str, set[str]] = {}
        self.leading: Any = lambda: True  # the loop sets its leader check: only the leader counts moves
        self.placements.store.listeners.append(self._placement_changed)
        self.pods.store.listeners.append(self._pod_changed)

    # -- events --------------------------------------------------------------------------------

    def _placement_changed(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        if new is None:
            uid = Placement(old or {}).uid
            self.next_attempt.pop(uid, None)
            self.first_attempt.pop(uid, None)
            self.evicted.pop(uid, None)
            self.workload_at_eviction.pop(uid, None)
            return
        self.queue.add(key)
        was, now = Placement(old or {}).status, Placement(new).status
        if now.finished and not was.finished:
            # Whoever wrote it (this controller, or a webhook failing a target at admission).
            if old is not None and self.leading():
                self.metrics.moved(now.result())
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
        for p in self._placements_where(lambda p: p.status.phase == s.PENDING and bool(p.spec.evict_pod)):
            self.queue.add(p.key)

    def _placements_where(self, predicate: Any) -> list[Placement]:
        return [Placement(body) for body in self.placements.store.select(lambda body: predicate(Placement(body)))]

    def start_informers(self) -> None:
        self.placements.start()
        self.pods.start()
        self.view.start()

    def synced(self) -> bool:
        return self.placements.synced() and self.pods.synced() and self.view.synced()

    def fail(self, placement: Placement, condition: s.Condition) -> None:
        self.writer.fail(placement, condition)

    # -- reconcile -----------------------------------------------------------------------------

    def reconcile_all(self) -> None:
        """Every placement once. Without running informers (one-shot use, tests) it re-lists first."""
        if not self.placements.started:
            self.placements.relist()
            self.pods.relist()
            self.view.relist()
        for body in self.placements.store.items():
            placement = Placement(body)
            try:
                self.reconcile(placement)
            except ApiError as exc:
                log.warning("reconcile %s: %s", placement.key, exc)

    def reconcile_key(self, key: str) -> None:
        body = self.placements.store.get(key)
        if body is not None:
            self.reconcile(Placement(body))

    def reconcile(self, placement: Placement) -> None:
        phase = placement.status.phase
        if phase in s.FINAL:
            return
        if not phase or (phase == s.PENDING and placement.spec_changed):
            self.validate(placement)  # new, or its spec changed since validation (e.g. evictPod added)
        elif phase == s.PENDING:
            self.pending(placement)
        elif phase == s.DELETING:
            self.deleting(placement)

    def _target_check(self, placement: Placement, pod: dict[str, Any] | None) -> dict[str, Any]:
        """The target checked on the watched view, with the evictee and the target node just read.
        The engine's answer: `ok`, `uuids`, `message`, `field` (the placement field that is wrong), `pin`."""
        spec = placement.spec
        node = k.get_node(self.client, spec.node_name) if spec.node_name else None
        self.view.refresh(*(orjson.dumps(o) for o in (pod, node) if o is not None))
        return orjson.loads(self.view.validate_target(placement.evictee, spec.node_name, spec.gpu_devices))

    def validate(self, placement: Placement) -> None:
        spec = placement.spec
        if not spec.match_labels:
            message = "spec.podSelector.matchLabels is empty: it would match every pod in the namespace"
            return self.fail(placement, (s.VALIDATED, False, s.INVALID_SPEC, message))
        duplicate = self._executed_req_id(placement)
        if duplicate is not None:
            message = f"spec.reqID {spec.req_id!r} was already executed by {duplicate.key}"
            return self.fail(placement, (s.VALIDATED, False, s.DUPLICATE_REQ_ID, message))
        pod = k.get_pod(self.client, placement.namespace, spec.evict_pod) if spec.evict_pod else None
        if spec.evict_pod:
            problem = evictee_problem(placement, pod, self.view, self.scheduler_name)
            if problem:
                return self.fail(placement, (s.VALIDATED, False, s.INVALID_EVICTEE, problem))
        result = self._target_check(placement, pod)
        if not result["ok"]:
            message = f"{result['field']}: invalid target: {result['message']}"
            return self.fail(placement, (s.VALIDATED, False, s.INVALID_TARGET, message))
        evictee = placement.evictee
        checked = f"node {spec.node_name} GPUs {result['uuids']} checked" + (f" for {evictee}" if evictee else "")
        update = StatusUpdate(
            phase=s.PENDING,
            message="target validated",
            resolved_uuids=result["uuids"],
            pin_annotations=result["pin"],
            validated_at=k.now_rfc3339(),
            observed_generation=placement.generation,
        )
        self.writer.write(placement, update, (s.VALIDATED, True, s.TARGET_VALID, checked))

    def _executed_req_id(self, placement: Placement) -> Placement | None:
        """Another placement that already carried out (or is carrying out) this one's reqID."""
        executed = (s.PENDING, s.DELETING, s.PARTIAL, s.COMPLETED)
        req_id = placement.spec.req_id
        others = self._placements_where(
            lambda p: p.uid != placement.uid and p.spec.req_id == req_id and p.status.phase in executed
        )
        return others[0] if others else None

    def _expire(self, placement: Placement) -> None:
        ttl = self.timeouts.ttl
        evict_pod = placement.spec.evict_pod
        waited = f"evictPod {evict_pod} was not evicted" if evict_pod else "no matching pod was created"
        message = (
            f"expired: not consumed within the placement TTL ({ttl:.0f}s, --placement-ttl) after creation; "
            f"{waited}; the pin no longer applies"
        )
        self.fail(placement, (s.CLAIMED, False, s.EXPIRED, message))

    def _requeue_for_ttl(self, placement: Placement, margin: float = 0.0) -> None:
        if self.timeouts.ttl > 0:
            self.queue.add_after(placement.key, self.timeouts.ttl - margin - placement.age() + 1.0)

    def in_flight(self) -> list[Placement]:
        return self._placements_where(lambda p: p.status.phase == s.DELETING)

    def pending(self, placement: Placement) -> None:
        status = placement.status
        passive = not placement.spec.evict_pod
        if not status.claimed_by:
            margin = 0.0 if passive else self.timeouts.expiry_margin()
            if placement.expired(self.timeouts.ttl, margin):
                return self._expire(placement)
            self._requeue_for_ttl(placement, margin)
        if status.claimed_by or passive:
            # Passive placement (or a pod was pinned before any eviction): wait for the pinned pod.
            return self.watch_replacement(placement)
        if self.dry_run:
            return
        wait = self.next_attempt.get(placement.uid, 0.0) - time.monotonic()
        if wait > 0:
            return self.queue.add_after(placement.key, wait)
        waiting = self._pacing(placement)
        if waiting:
            if status.message != waiting:
                self.writer.write(placement, StatusUpdate(message=waiting))
            return
        self._evict_checked(placement)

    def _pacing(self, placement: Placement) -> str:
        """Why the eviction waits ('' when it may start): a bounded number of moves at once, and
        never two of one workload (same selector)."""
        in_flight = self.in_flight()
        same = [p for p in in_flight if p.same_workload(placement)]
        if same:
            return f"waiting: {same[0].name} moves the same workload"
        if len(in_flight) >= self.timeouts.max_in_flight:
            return f"waiting: {len(in_flight)} moves in flight (max {self.timeouts.max_in_flight})"
        return ""

    def _evict_checked(self, placement: Placement) -> None:
        """The evictee read again and the target checked again right before the eviction: the
        cluster may have moved since validation."""
        name = placement.spec.evict_pod
        pod = k.get_pod(self.client, placement.namespace, name)
        if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            gone = "already gone" if pod is None else "already terminating"
            update = StatusUpdate(
                phase=s.DELETING,
                message=f"pod {name} {gone}; waiting for the replacement",
                evicted_at=k.now_rfc3339(),
                evicted_uid=(pod or {}).get("metadata", {}).get("uid", ""),
            )
            self.writer.record(
                placement, update, (s.EVICTION, True, s.ALREADY_GONE, f"pod {name} {gone} before the eviction")
            )
            return
        problem = evictee_problem(placement, pod, self.view, self.scheduler_name)
        if problem:
            return self.fail(placement, (s.VALIDATED, False, s.INVALID_EVICTEE, problem))
        result = self._target_check(placement, pod)
        if not result["ok"]:
            message = f"{result['field']}: target no longer valid: {result['message']}; nothing was evicted"
            return self.fail(placement, (s.VALIDATED, False, s.TARGET_GONE, message))
        self.evict(placement, pod)

    def evict(self, placement: Placement, pod: dict[str, Any]) -> None:
        status, evictee, uid = placement.status, placement.evictee, placement.uid
        first = status.first_eviction_attempt or k.now_rfc3339()
        self.first_attempt.setdefault(uid, time.monotonic() - stamp_age(status.first_eviction_attempt))
        # before the call: an answer lost (the API server restarting) may leave the pod gone unseen
        self.workload_at_eviction.setdefault(uid, {p["metadata"]["name"] for p in self._workload_pods(placement)})
        code = k.evict(self.client, placement.namespace, placement.spec.evict_pod)
        attempts = status.eviction_attempts + 1
        if code == 429:
            return self._eviction_refused(placement, first, attempts)
        self.next_attempt.pop(uid, None)
        self.evicted[uid] = time.monotonic()
        self.metrics.eviction_seconds.observe(max(0.0, self.evicted[uid] - self.first_attempt.pop(uid)))
        self.queue.add_after(placement.key, self.timeouts.replacement + 1.0)
        update = StatusUpdate(
            phase=s.DELETING,
            message=f"evicted {evictee}; waiting for the replacement",
            eviction_attempts=attempts,
            first_eviction_attempt=first,
            evicted_at=k.now_rfc3339(),
            evicted_uid=pod["metadata"].get("uid", ""),
        )
        accepted = f"eviction of {evictee} accepted after {attempts} attempt(s)"
        self.writer.record(placement, update, (s.EVICTION, True, s.EVICTED, accepted))

    def _eviction_refused(self, placement: Placement, first: str, attempts: int) -> None:
        """A disruption budget said no (429): retry with backoff until --eviction-timeout."""
        evictee, uid = placement.evictee, placement.uid
        if stamp_age(first) > self.timeouts.eviction:
            message = (
                f"spec.evictPod: eviction of {evictee} blocked by a PodDisruptionBudget for "
                f"{self.timeouts.eviction:.0f}s; nothing was evicted"
            )
            self.first_attempt.pop(uid, None)
            return self.fail(placement, (s.EVICTION, False, s.EVICTION_TIMEOUT, message))
        delay = min(self.timeouts.backoff_max, self.timeouts.backoff_min * 2 ** min(attempts - 1, 10))
        self.next_attempt[uid] = time.monotonic() + delay
        self.queue.add_after(placement.key, delay)
        if attempts == 1:
            blocked = f"eviction of {evictee} refused by a PodDisruptionBudget; retrying with backoff"
            self.writer.event(placement, "Warning", s.EVICTION_BLOCKED_EVENT, blocked)
        refused = f"eviction of {evictee} refused (429, disruption budget); retry {attempts} in {delay:.0f}s"
        update = StatusUpdate(message=refused, eviction_attempts=attempts, first_eviction_attempt=first)
        self.writer.write(placement, update, (s.EVICTION, False, s.DISRUPTION_BUDGET, refused))

    def deleting(self, placement: Placement) -> None:
        status = placement.status
        if not status.claimed_by:
            unpinned = self._unpinned_replacement(placement)
            if unpinned is not None:
                return self._watch_unpinned(placement, unpinned)
            waited = stamp_age(status.evicted_at)
            if waited > self.timeouts.replacement:
                message = f"no replacement pod was pinned within {self.timeouts.replacement:.0f}s after the eviction"
                return self.fail(placement, (s.REPLACEMENT, False, s.REPLACEMENT_TIMEOUT, message))
            self.queue.add_after(placement.key, self.timeouts.replacement - waited + 1.0)
        self.watch_replacement(placement)

    def _workload_pods(self, placement: Placement) -> list[dict[str, Any]]:
        """The pods its `spec.podSelector` selects in its namespace, as the pod informer holds them."""
        namespace, wanted = placement.namespace, placement.spec.match_labels

        def selected(pod: dict[str, Any]) -> bool:
            meta = pod.get("metadata") or {}
            labels = meta.get("labels") or {}
            return meta.get("namespace") == namespace and all(labels.get(k) == v for k, v in wanted.items())

        return self.pods.store.select(selected) if wanted else []

    def _unpinned_replacement(self, placement: Placement) -> dict[str, Any] | None:
        """The evicted pod's replacement admitted without the pin: a pod of the same workload created
        since the eviction that carries no placement's stamp (the webhook could not pin it, e.g. the
        API server restarting between the eviction and the replacement's admission). Its workload
        makes no other replacement, so no pinned pod will come."""
        evicted_at = placement.status.evicted_at
        if not evicted_at:
            return None
        known = self.workload_at_eviction.get(placement.uid)

        def created_since(meta: dict[str, Any]) -> bool:
            if known is not None:  # this controller evicted: a pod it did not see then is new
                return meta["name"] not in known
            # after a restart, by creation time (whole seconds: the eviction's own second is unsure)
            return (meta.get("creationTimestamp") or "") > evicted_at

        found = [
            p
            for p in self._workload_pods(placement)
            if p["metadata"].get("name") != placement.spec.evict_pod
            and not pinned_by(p)
            and not p["metadata"].get("deletionTimestamp")
            and created_since(p["metadata"])
        ]
        found.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
        return found[0] if found else None

    def _watch_unpinned(self, placement: Placement, pod: dict[str, Any]) -> None:
        """The unpinned replacement decides the move once it binds: on the target, the move's aim is
        met (Completed); elsewhere it failed (WrongTarget). Its binding is polled: its events name no
        placement."""
        pod_name = pod["metadata"]["name"]
        message = f"pod {pod_name} was admitted without the pin (the pinning webhook could not pin it)"
        placement = placement.with_status(condition=(s.REPLACEMENT, True, s.CREATED_WITHOUT_PIN, message))
        node = (pod.get("spec") or {}).get("nodeName")
        used = allocated_devices(pod["metadata"].get("annotations") or {})
        if node and used:
            return self.bound(placement, pod_name, node, used)
        if placement.status.message != message:
            self.writer.write(placement, StatusUpdate(message=message))
        self.queue.add_after(placement.key, UNPINNED_POLL)

    def watch_replacement(self, placement: Placement) -> None:
        status = placement.status
        pinned = self.pods.store.indexed(placement.key)
        if not pinned:
            if status.claimed_by:
                waited = stamp_age(status.consumed_at)
                if waited > self.timeouts.replacement:
                    message = "the placement was claimed but no pinned pod appeared (creation failed or was rejected)"
                    return self.fail(placement, (s.REPLACEMENT, False, s.REPLACEMENT_TIMEOUT, message))
                self.queue.add_after(placement.key, self.timeouts.replacement - waited + 1.0)
            return
        pod = pinned[0]
        pod_name = pod["metadata"]["name"]
        placement = placement.with_status(
            condition=(s.REPLACEMENT, True, s.POD_CREATED, f"pod {pod_name} carries the pin")
        )
        annotations = pod["metadata"].get("annotations") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        if annotations.get(keys.BIND_PHASE) == "failed":
            message = f"pod {pod_name} failed to bind on {placement.spec.node_name} ({keys.BIND_PHASE}=failed)"
            return self.fail(placement, (s.SCHEDULED, False, s.BIND_FAILED, message))
        used = allocated_devices(annotations)
        if node and used:
            return self.bound(placement, pod_name, node, used)
        details = [assignment(pod_name, u) for u in status.resolved_uuids]
        if status.assignment_details != details:
            message = f"pod {pod_name} pinned; waiting for it to bind"
            self.writer.write(placement, StatusUpdate(assignment_details=details, message=message))
        elif stamp_age(status.consumed_at) > self.timeouts.bind:
            message = f"pod {pod_name} did not bind on the target within {self.timeouts.bind:.0f}s"
            return self.fail(placement, (s.SCHEDULED, False, s.BIND_TIMEOUT, message))
        self.queue.add_after(placement.key, self.timeouts.bind - stamp_age(status.consumed_at) + 1.0)

    def bound(self, placement: Placement, pod_name: str, node: str, used: set[str]) -> None:
        """The pinned pod is bound: on the target node and GPUs (all of them, or some), or elsewhere."""
        spec, status = placement.spec, placement.status
        uuids = status.resolved_uuids
        if node != spec.node_name or not used <= set(uuids):
            message = f"pod {pod_name} landed on {node} GPUs {sorted(used)}, not on the target {spec.node_name} {uuids}"
            return self.fail(placement, (s.SCHEDULED, False, s.WRONG_TARGET, message))
        details = [assignment(pod_name, u) for u in uuids if u in used]
        unused = [u for u in uuids if u not in used]
        if unused:
            phase, reason = s.PARTIAL, s.PARTIAL_ASSIGNMENT
            message = f"pod {pod_name} runs on {node} {sorted(used)}; {unused} of spec.gpuDevices stay unassigned"
        else:
            phase, reason = s.COMPLETED, s.BOUND_ON_TARGET
            message = f"pod {pod_name} runs on {node} {sorted(used)}"
        update = StatusUpdate(
            phase=phase,
            message=message,
            assignment_details=details,
            consumed_at=status.consumed_at or k.now_rfc3339(),
        )
        written = self.writer.write(placement, update, (s.SCHEDULED, True, reason, message))
        if written is not None and status.evicted_at:
            since = self.evicted.pop(placement.uid, None)
            took = time.monotonic() - since if since else stamp_age(status.evicted_at)
            self.metrics.move_seconds.observe(max(0.0, took))


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

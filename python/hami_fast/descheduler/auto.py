"""`hami-fast descheduler --auto`: unblock pods that are Pending for lack of vGPU resources.

Each pass (leader only): the oldest such pod (its PodScheduled condition carries one of the
extender's vGPU reasons) is planned with `--for` over the opted-in pods only, and the plan is
applied as `plan --for --apply` does: the reservation on the pending pod first, then one
HamiPodPlacement per move. Moves are capped per sliding hour, counted from the placements this
mode created (labelled `app.kubernetes.io/managed-by: hami-fast-descheduler-auto`), so a restart
or a new leader keeps the count; bare pods are never moved (the planner refuses them);
disruption budgets are enforced by the Eviction API the controller uses, and a refused eviction
is not counted as a move. With `--dry-run` it only logs and posts an Event
on the pending pod for the moves it would make.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from hami_fast.descheduler import kube as k
from hami_fast.descheduler.apply import MANAGED_BY, RESERVATION, RESERVATION_EXPIRES, apply_for
from hami_fast.descheduler.metrics import DeschedulerMetrics
from hami_fast.descheduler.planner import plan
from hami_fast.kube import times
from hami_fast.kube.client import KubeClient, path_of
from hami_fast.kube.errors import ApiError
from hami_fast.kube.events import event_body

log = logging.getLogger("hami_fast.descheduler.auto")

# Why a pod cannot be placed that moving other pods can change (the extender's Filter reasons,
# as kube-scheduler copies them into the PodScheduled condition, and kube-scheduler's own count check).
VGPU_REASONS = (
    "CardInsufficientMemory",
    "CardInsufficientCore",
    "CardTimeSlicingExhausted",
    "ExclusiveDeviceAllocateConflict",
    "CardComputeUnitsExhausted",
    "AllocatedCardsInsufficientRequest",
    "NodeInsufficientDevice",
    "Insufficient nvidia.com/",
)
DEFAULT_SELECTOR = "hami-fast.io/movable=true"
COMPONENT = "hami-fast-descheduler"
BY_AUTO = "hami-fast-descheduler-auto"  # the managed-by label of the placements this mode creates
HOUR = 3600.0


@dataclass
class AutoOptions:
    max_moves_per_hour: int = 6
    max_moves_per_pod: int = 4
    selector: str = DEFAULT_SELECTOR
    namespace_selector: str = ""
    dry_run: bool = False
    period: float = 30.0
    reservation_ttl: float = 600.0
    interval: float = 5.0
    move_timeout: float = 900.0


def waiting_for_vgpu(pod: dict[str, Any]) -> bool:
    """Pending, unbound, not terminating, and its last scheduling attempt failed for a vGPU reason."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    if status.get("phase") not in (None, "", "Pending") or spec.get("nodeName") or meta.get("deletionTimestamp"):
        return False
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return any(r in (c.get("message") or "") for r in VGPU_REASONS)
    return False


def holds_reservation(pod: dict[str, Any], now: float) -> bool:
    """A live hold is being worked on already (its moves run, or the scheduler is about to place it)."""
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    if RESERVATION not in ann:
        return False
    try:
        return times.parse(ann.get(RESERVATION_EXPIRES) or "").timestamp() > now
    except ValueError:
        return False


def pod_key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


class AutoMover:
    def __init__(self, client: KubeClient, options: AutoOptions, metrics: DeschedulerMetrics | None = None) -> None:
        self.client, self.options, self.metrics = client, options, metrics
        self.announced: set[tuple[str, str]] = set()

    def budget(self, now: float) -> int:
        return self.options.max_moves_per_hour - self.moves_within_the_hour(now)

    def moves_within_the_hour(self, now: float) -> int:
        """This mode's placements that evicted within the hour before `now`, or are still open
        (validated or new, created within the hour: about to evict)."""
        query = [("labelSelector", f"{MANAGED_BY}={BY_AUTO}")]
        items = self.client.request("GET", k.placements_path(), query=query).json().get("items") or []
        at = datetime.fromtimestamp(now, UTC)

        def within(stamp: str | None) -> bool:
            age = times.age_seconds(stamp, at) if stamp else None
            return age is not None and age < HOUR

        count = 0
        for p in items:
            status = p.get("status") or {}
            if status.get("evictedAt"):
                count += within(status["evictedAt"])
            elif status.get("phase") in (None, "", "Pending"):
                count += within(p["metadata"].get("creationTimestamp"))
        return count

    def opted_in(self) -> list[str]:
        """Pods that may be moved: matching --selector, or in a namespace matching --namespace-selector."""
        keys: set[str] = set()
        if self.options.selector:
            query = [("labelSelector", self.options.selector)]
            items = self.client.request("GET", "/api/v1/pods", query=query).json().get("items") or []
            keys.update(pod_key(p) for p in items)
        if self.options.namespace_selector:
            query = [("labelSelector", self.options.namespace_selector)]
            for ns in self.client.request("GET", "/api/v1/namespaces", query=query).json().get("items") or []:
                name = ns["metadata"]["name"]
                keys.update(pod_key(p) for p in k.list_pods(self.client, name))
        return sorted(keys)

    def run_once(self) -> dict[str, Any] | None:
        """One pass: plans (and applies) for the oldest pod it can unblock; what it did, or None."""
        try:
            outcome, result = self._pass()
        except Exception:
            self._count("error")
            raise
        self._count(outcome)
        return result

    def _count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.auto_passes.labels(outcome).inc()

    def _pass(self) -> tuple[str, dict[str, Any] | None]:
        now = time.time()
        budget = self.budget(now)
        if budget <= 0:
            return "budget_spent", None
        inputs = k.snapshot_inputs(self.client)
        pods = orjson.loads(inputs[1]).get("items") or []
        waiting = [p for p in pods if waiting_for_vgpu(p) and not holds_reservation(p, now)]
        if not waiting:
            return "idle", None
        waiting.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", pod_key(p)))
        movable = self.opted_in()
        for pod in waiting:
            result = plan(
                inputs,
                min(budget, self.options.max_moves_per_pod),
                baseline=False,
                for_pod=pod,
                movable=movable,
            )
            if not result["unblocked"] or not result["moves"]:
                continue
            if self.options.dry_run:
                self.announce(pod, result)
                return "dry_run", {"pod": pod_key(pod), "dry_run": True, "moves": result["moves"], "moved": 0}
            done = apply_for(
                self.client,
                result,
                self.options.reservation_ttl,
                self.options.interval,
                self.options.move_timeout,
                say=log.info,
                manager=BY_AUTO,
            )
            moved = sum(1 for r in done if self.evicted(r))
            summary = {"pod": pod_key(pod), "dry_run": False, "moves": result["moves"], "moved": moved, "results": done}
            return ("moved" if moved else "refused"), summary
        return "no_plan", None

    def evicted(self, result: dict[str, Any]) -> bool:
        """A move counts once its pod was evicted: Completed, or failed after the old pod left.
        A refused eviction (a disruption budget) leaves the pod in place: not moved."""
        if result.get("phase") == "Completed":
            return True
        if not result.get("placement"):
            return False
        namespace, name = result["move"]["pod"].split("/", 1)
        return k.get_pod(self.client, namespace, name) is None

    def announce(self, pod: dict[str, Any], result: dict[str, Any]) -> None:
        moves = "; ".join(
            f"{m['pod']} {m['from']['node']}/{','.join(m['from']['gpus'])} -> {m['to']['node']}/{','.join(m['to']['gpus'])}"
            for m in result["moves"]
        )
        target = result["target"]
        message = f"dry run: would move {moves}; then it fits on {target['node']}/{','.join(target['gpus'])}"
        log.info("%s: %s", pod_key(pod), message)
        meta = pod["metadata"]
        if (meta.get("uid", ""), message) in self.announced:
            return
        self.announced.add((meta.get("uid", ""), message))
        body = event_body(
            meta["namespace"], meta["name"], meta.get("uid", ""), "Normal", "WouldMove", message, COMPONENT
        )
        try:
            self.client.request("POST", path_of("api", "v1", "namespaces", meta["namespace"], "events"), body=body)
        except ApiError as exc:
            log.warning("event for %s not posted: %s", pod_key(pod), exc)


class AutoLoop(threading.Thread):
    """Runs [`AutoMover.run_once`] every period while this replica leads."""

    def __init__(self, mover: AutoMover, leading: threading.Event, stop: threading.Event) -> None:
        super().__init__(name="descheduler-auto", daemon=True)
        self.mover, self.leading, self.stop_event = mover, leading, stop

    def run(self) -> None:
        while not self.stop_event.is_set():
            if self.leading.is_set():
                try:
                    self.mover.run_once()
                except ApiError as exc:
                    log.warning("automatic mode: %s", exc)
                except Exception:  # keep the loop alive; the next pass tries again
                    log.exception("automatic mode: pass failed")
            self.stop_event.wait(self.mover.options.period)

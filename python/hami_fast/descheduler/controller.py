"""HamiPodPlacement controller: validate the target, evict the old pod through the Eviction API,
wait for the pinned replacement to bind, and keep `status` current at each step.

All state that matters lives in the placement's status, so a restarted controller resumes where
the previous one stopped (an evicted pod is never evicted twice). Phases: (new) -> Pending ->
[DeletingOldPod] -> Completed, or Failed with a message naming the problem.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from hami_fast import _native
from hami_fast.descheduler import kube as k
from hami_fast.descheduler.webhook import labels_match
from hami_fast.kube.client import ApiError, KubeClient

log = logging.getLogger("hami_fast.descheduler.controller")


@dataclass
class Timeouts:
    eviction: float = 300.0  # a disruption budget may block this long before Failed
    replacement: float = 600.0  # old pod gone -> pinned replacement created
    bind: float = 900.0  # replacement created -> bound on the target
    backoff_min: float = 1.0
    backoff_max: float = 30.0
    max_in_flight: int = 2  # evictions whose replacement has not completed yet, cluster-wide


def _age(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return (datetime.now(UTC) - then).total_seconds()


def controller_owner(pod: dict[str, Any]) -> dict[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


class Controller:
    def __init__(
        self,
        client: KubeClient,
        timeouts: Timeouts | None = None,
        dry_run: bool = False,
        config: bytes | None = None,
        scheduler_name: str = k.SCHEDULER_NAME,
    ) -> None:
        self.client, self.timeouts, self.dry_run, self.config = client, timeouts or Timeouts(), dry_run, config
        self.scheduler_name = scheduler_name
        self.next_attempt: dict[str, float] = {}
        self.in_flight: list[dict[str, Any]] = []

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

    REASONS = {
        "Pending": ("Normal", "TargetValidated"),
        "DeletingOldPod": ("Normal", "Evicted"),
        "Completed": ("Normal", "Completed"),
        "Failed": ("Warning", "Failed"),
    }

    def _write(self, placement: dict[str, Any], **changes: Any) -> dict[str, Any] | None:
        status = placement.setdefault("status", {})
        new_phase = changes.get("phase")
        if new_phase and new_phase != status.get("phase") and new_phase in self.REASONS:
            event_type, reason = self.REASONS[new_phase]
            self.event(placement, event_type, reason, str(changes.get("message", "")))
        status.update(changes)
        status["observedGeneration"] = placement["metadata"].get("generation", 1)
        try:
            return k.put_status(self.client, placement)
        except ApiError as exc:
            if exc.status in (404, 409):  # deleted, or changed under us: next round re-reads
                return None
            raise

    def fail(self, placement: dict[str, Any], message: str) -> None:
        log.info("placement failed", extra={"placement": self._key(placement), "reason": message})
        self._write(placement, phase="Failed", message=message)

    @staticmethod
    def _key(placement: dict[str, Any]) -> str:
        return f"{placement['metadata']['namespace']}/{placement['metadata']['name']}"

    # -- reconcile -----------------------------------------------------------------------------

    def reconcile_all(self) -> None:
        placements = k.list_placements(self.client)
        self.in_flight = [p for p in placements if (p.get("status") or {}).get("phase") == "DeletingOldPod"]
        for placement in placements:
            try:
                self.reconcile(placement, placements)
            except ApiError as exc:
                log.warning("reconcile %s: %s", self._key(placement), exc)

    def reconcile(self, placement: dict[str, Any], everyone: list[dict[str, Any]] | None = None) -> None:
        phase = (placement.get("status") or {}).get("phase")
        if phase in ("Completed", "Failed"):
            return
        if not phase:
            self.validate(placement, everyone or [])
        elif phase == "Pending":
            self.pending(placement)
        elif phase == "DeletingOldPod":
            self.deleting(placement)
        elif phase == "PartiallyCompleted":
            self.watch_replacement(placement)

    def _target_check(self, placement: dict[str, Any], pod_key: str) -> dict[str, Any]:
        spec = placement.get("spec") or {}
        inputs = k.snapshot_inputs(self.client)
        return orjson.loads(
            _native.validate_target(
                inputs, pod_key, spec.get("nodeName", ""), list(spec.get("gpuDevices") or []), self.config
            )
        )

    def validate(self, placement: dict[str, Any], everyone: list[dict[str, Any]]) -> None:
        spec = placement.get("spec") or {}
        meta = placement["metadata"]
        if not ((spec.get("podSelector") or {}).get("matchLabels")):
            return self.fail(
                placement, "spec.podSelector.matchLabels is empty: it would match every pod in the namespace"
            )
        req_id = spec.get("reqID")
        for other in everyone:
            o_meta, o_status = other["metadata"], other.get("status") or {}
            if o_meta.get("uid") == meta.get("uid") or (other.get("spec") or {}).get("reqID") != req_id:
                continue
            if o_status.get("phase") in ("Pending", "DeletingOldPod", "PartiallyCompleted", "Completed"):
                return self.fail(
                    placement, f"reqID {req_id!r} was already executed by {o_meta['namespace']}/{o_meta['name']}"
                )
        evictee = spec.get("evictPod") or ""
        pod_key = f"{meta['namespace']}/{evictee}" if evictee else ""
        if evictee:
            problem = self.evictee_problem(placement, k.get_pod(self.client, meta["namespace"], evictee))
            if problem:
                return self.fail(placement, problem)
        result = self._target_check(placement, pod_key)
        if not result["ok"]:
            return self.fail(placement, f"invalid target: {result['message']}")
        self._write(
            placement,
            phase="Pending",
            message="target validated",
            resolvedUUIDs=result["uuids"],
            validatedAt=k.now_rfc3339(),
        )

    def pending(self, placement: dict[str, Any]) -> None:
        spec, status = placement.get("spec") or {}, placement.get("status") or {}
        if status.get("claimedBy") or not spec.get("evictPod"):
            # Passive placement (or a pod was pinned before any eviction): wait for the pinned pod.
            return self.watch_replacement(placement)
        if self.dry_run:
            return
        uid = placement["metadata"].get("uid", "")
        if time.monotonic() < self.next_attempt.get(uid, 0.0):
            return
        namespace, name = placement["metadata"]["namespace"], spec["evictPod"]
        # Pacing: a bounded number of moves at once, and never two of one workload (same selector).
        selector = (spec.get("podSelector") or {}).get("matchLabels")
        same = [
            p
            for p in self.in_flight
            if p["metadata"]["namespace"] == namespace
            and ((p.get("spec") or {}).get("podSelector") or {}).get("matchLabels") == selector
        ]
        if same or len(self.in_flight) >= self.timeouts.max_in_flight:
            why = (
                f"waiting: {same[0]['metadata']['name']} moves the same workload"
                if same
                else f"waiting: {len(self.in_flight)} moves in flight (max {self.timeouts.max_in_flight})"
            )
            if status.get("message") != why:
                self._write(placement, message=why)
            return
        pod = k.get_pod(self.client, namespace, name)
        if pod is None:
            return self._write(
                placement,
                phase="DeletingOldPod",
                message=f"pod {name} already gone; waiting for the replacement",
                evictedAt=k.now_rfc3339(),
            )
        problem = self.evictee_problem(placement, pod)
        if problem:
            return self.fail(placement, problem)
        # Re-check the target right before evicting: the cluster may have moved since validation.
        result = self._target_check(placement, f"{namespace}/{name}")
        if not result["ok"]:
            return self.fail(placement, f"invalid target: {result['message']}")
        first = status.get("firstEvictionAttempt") or k.now_rfc3339()
        code = k.evict(self.client, namespace, name)
        attempts = int(status.get("evictionAttempts") or 0) + 1
        if code == 429:
            if _age(first) > self.timeouts.eviction:
                return self.fail(
                    placement,
                    f"eviction of {namespace}/{name} blocked by a PodDisruptionBudget for {self.timeouts.eviction:.0f}s; nothing was evicted",
                )
            delay = min(self.timeouts.backoff_max, self.timeouts.backoff_min * 2 ** min(attempts - 1, 10))
            self.next_attempt[uid] = time.monotonic() + delay
            if attempts == 1:
                self.event(
                    placement,
                    "Warning",
                    "EvictionBlocked",
                    f"eviction of {namespace}/{name} refused by a PodDisruptionBudget; retrying with backoff",
                )
            self._write(
                placement,
                message=f"eviction of {namespace}/{name} refused (429, disruption budget); retry {attempts} in {delay:.0f}s",
                evictionAttempts=attempts,
                firstEvictionAttempt=first,
            )
            return
        self.next_attempt.pop(uid, None)
        self.in_flight.append(placement)
        self._write(
            placement,
            phase="DeletingOldPod",
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
        if pod is None:
            return f"evictPod {namespace}/{name} not found"
        if not labels_match(spec.get("podSelector"), (pod.get("metadata") or {}).get("labels") or {}):
            return f"evictPod {namespace}/{name} does not match spec.podSelector"
        owner = controller_owner(pod)
        if owner is None:
            return f"evictPod {namespace}/{name} is a bare pod (no controller owner): it would not be recreated, so it is not evicted"
        if owner.get("kind") in ("DaemonSet", "Node"):
            return f"evictPod {namespace}/{name} is a {owner['kind']} pod and is not evicted"
        if (pod.get("spec") or {}).get("schedulerName") != self.scheduler_name:
            return f"evictPod {namespace}/{name} does not use schedulerName {self.scheduler_name}: its replacement would not be pinned"
        return ""

    def deleting(self, placement: dict[str, Any]) -> None:
        status = placement.get("status") or {}
        if not status.get("claimedBy") and _age(status.get("evictedAt")) > self.timeouts.replacement:
            return self.fail(
                placement, f"no replacement pod was pinned within {self.timeouts.replacement:.0f}s after the eviction"
            )
        self.watch_replacement(placement)

    def watch_replacement(self, placement: dict[str, Any]) -> None:
        meta, spec, status = placement["metadata"], placement.get("spec") or {}, placement.get("status") or {}
        stamp = f"{meta['namespace']}/{meta['name']}"
        pinned = [
            p
            for p in k.list_pods(self.client, meta["namespace"])
            if ((p.get("metadata") or {}).get("annotations") or {}).get(k.STAMP_NAME) == stamp
        ]
        if not pinned:
            if status.get("claimedBy") and _age(status.get("consumedAt")) > self.timeouts.replacement:
                return self.fail(
                    placement, "the placement was claimed but no pinned pod appeared (creation failed or was rejected)"
                )
            return
        pod = pinned[0]
        pod_name = pod["metadata"]["name"]
        uuids = status.get("resolvedUUIDs") or []
        details = [{"podName": pod_name, "gpuDevice": u} for u in uuids]
        annotations = pod["metadata"].get("annotations") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        if annotations.get("hami.io/bind-phase") == "failed":
            return self.fail(placement, f"pod {pod_name} failed to bind on {spec.get('nodeName')}")
        allocated = annotations.get(k.ALLOCATED)
        if node and allocated:
            used = {entry.split(",")[0] for slot in allocated.split(";") for entry in slot.split(":") if entry}
            if node != spec.get("nodeName") or not used <= set(uuids):
                return self.fail(
                    placement,
                    f"pod {pod_name} landed on {node} GPUs {sorted(used)}, not on the target {spec.get('nodeName')} {uuids}",
                )
            return self._write(
                placement,
                phase="Completed",
                message=f"pod {pod_name} runs on {node} {sorted(used)}",
                assignmentDetails=details,
                consumedAt=status.get("consumedAt") or k.now_rfc3339(),
            )
        if status.get("assignmentDetails") != details:
            self._write(placement, assignmentDetails=details, message=f"pod {pod_name} pinned; waiting for it to bind")
        elif _age(status.get("consumedAt")) > self.timeouts.bind:
            self.fail(placement, f"pod {pod_name} did not bind on the target within {self.timeouts.bind:.0f}s")


class ControllerLoop(threading.Thread):
    """Reconciles every `period` seconds while this replica leads."""

    def __init__(
        self, controller: Controller, leading: threading.Event, stop: threading.Event, period: float = 1.0
    ) -> None:
        super().__init__(name="placement-controller", daemon=True)
        self.controller, self.leading, self.stop_event, self.period = controller, leading, stop, period

    def run(self) -> None:
        while not self.stop_event.is_set():
            if self.leading.is_set():
                try:
                    self.controller.reconcile_all()
                except Exception:  # keep the loop alive; the next round retries
                    log.exception("reconcile round failed")
            self.stop_event.wait(self.period)

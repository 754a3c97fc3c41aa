"""Typed read-only views of a HamiPodPlacement (deploy/crds/): the one place that knows the CRD's
field names and their defaults. `Placement(body)` wraps the object as the API server returned it;
`.spec` and `.status` read it with named properties. A status write is a `StatusUpdate` applied to
a copy (`Placement.with_status`): the view never changes the object it was given.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields
from typing import Any

from hami_fast.descheduler import kube as k
from hami_fast.descheduler import status as s
from hami_fast.kube import times


class Spec:
    """`spec`: what the placement asks (required by the CRD: reqID, podSelector, nodeName, gpuDevices)."""

    __slots__ = ("_raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self._raw = raw

    @property
    def req_id(self) -> str:
        return str(self._raw.get("reqID") or "")

    @property
    def pod_selector(self) -> dict[str, Any]:
        return self._raw.get("podSelector") or {}

    @property
    def match_labels(self) -> dict[str, str]:
        return self.pod_selector.get("matchLabels") or {}

    @property
    def node_name(self) -> str:
        return self._raw.get("nodeName") or ""

    @property
    def gpu_devices(self) -> list[str]:
        return list(self._raw.get("gpuDevices") or [])

    @property
    def evict_pod(self) -> str:
        """The pod to evict (its name, in the placement's namespace); '' for a passive placement."""
        return self._raw.get("evictPod") or ""

    def selects(self, labels: dict[str, str]) -> bool:
        """Whether a pod with these labels matches `podSelector` (an empty selector matches none)."""
        want = self.match_labels
        return bool(want) and all(labels.get(key) == value for key, value in want.items())


class Status:
    """`status`: how far the placement got. Absent fields read as their zero value."""

    __slots__ = ("_raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self._raw = raw

    @property
    def phase(self) -> str | None:
        """None until the controller validated the placement."""
        return self._raw.get("phase") or None

    @property
    def finished(self) -> bool:
        return self.phase in s.FINAL

    @property
    def message(self) -> str:
        return self._raw.get("message") or ""

    @property
    def claimed_by(self) -> dict[str, str] | None:
        """The pod the webhook pinned (`podName`, `generateName`, `claimedAt`), once one was."""
        return self._raw.get("claimedBy") or None

    @property
    def resolved_uuids(self) -> list[str]:
        return list(self._raw.get("resolvedUUIDs") or [])

    @property
    def pin_annotations(self) -> dict[str, str]:
        return dict(self._raw.get("pinAnnotations") or {})

    @property
    def assignment_details(self) -> list[dict[str, str]]:
        return list(self._raw.get("assignmentDetails") or [])

    @property
    def consumed_at(self) -> str | None:
        return self._raw.get("consumedAt") or None

    @property
    def evicted_at(self) -> str | None:
        return self._raw.get("evictedAt") or None

    @property
    def first_eviction_attempt(self) -> str | None:
        return self._raw.get("firstEvictionAttempt") or None

    @property
    def eviction_attempts(self) -> int:
        return int(self._raw.get("evictionAttempts") or 0)

    @property
    def observed_generation(self) -> int | None:
        value = self._raw.get("observedGeneration")
        return int(value) if value else None

    @property
    def conditions(self) -> list[dict[str, Any]]:
        return list(self._raw.get("conditions") or [])

    def condition(self, kind: str) -> dict[str, Any] | None:
        return next((c for c in self.conditions if c.get("type") == kind), None)

    def result(self) -> str:
        """How a finished placement ended, as `hami_fast_descheduler_moves_total{result}` counts it."""
        if self.phase == s.COMPLETED:
            return "completed"
        if self.phase == s.PARTIAL:
            return "partially_completed"
        reasons = {c.get("reason") for c in self.conditions if c.get("status") == "False"}
        if s.EXPIRED in reasons:
            return "expired"
        if reasons & set(s.REJECTED_REASONS):
            return "rejected"
        return "failed"


# StatusUpdate's fields by their name in the CRD's status.
STATUS_FIELDS = {
    "phase": "phase",
    "message": "message",
    "resolved_uuids": "resolvedUUIDs",
    "pin_annotations": "pinAnnotations",
    "validated_at": "validatedAt",
    "observed_generation": "observedGeneration",
    "eviction_attempts": "evictionAttempts",
    "first_eviction_attempt": "firstEvictionAttempt",
    "evicted_at": "evictedAt",
    "evicted_uid": "evictedUID",
    "assignment_details": "assignmentDetails",
    "consumed_at": "consumedAt",
    "claimed_by": "claimedBy",
}


@dataclass(frozen=True)
class StatusUpdate:
    """The status fields one write sets (None: left as they are)."""

    phase: str | None = None
    message: str | None = None
    resolved_uuids: list[str] | None = None
    pin_annotations: dict[str, str] | None = None
    validated_at: str | None = None
    observed_generation: int | None = None
    eviction_attempts: int | None = None
    first_eviction_attempt: str | None = None
    evicted_at: str | None = None
    evicted_uid: str | None = None
    assignment_details: list[dict[str, str]] | None = None
    consumed_at: str | None = None
    claimed_by: dict[str, str] | None = None

    def as_status(self) -> dict[str, Any]:
        return {STATUS_FIELDS[f.name]: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


def new_placement(
    namespace: str,
    labels: dict[str, str],
    *,
    req_id: str,
    match_labels: dict[str, str],
    node_name: str,
    gpu_devices: list[str],
    evict_pod: str = "",
    generate_name: str = "defrag-",
) -> dict[str, Any]:
    """A HamiPodPlacement to create (the API server names it from `generate_name`)."""
    spec: dict[str, Any] = {
        "reqID": req_id,
        "podSelector": {"matchLabels": match_labels},
        "nodeName": node_name,
        "gpuDevices": gpu_devices,
    }
    if evict_pod:
        spec["evictPod"] = evict_pod
    return {
        "apiVersion": f"{k.GROUP}/{k.VERSION}",
        "kind": "HamiPodPlacement",
        "metadata": {"generateName": generate_name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def assignment(pod_name: str, gpu: str) -> dict[str, str]:
    """One entry of `status.assignmentDetails`."""
    return {"podName": pod_name, "gpuDevice": gpu}


def claim(pod_name: str, generate_name: str, at: str) -> dict[str, str]:
    """`status.claimedBy`."""
    return {"podName": pod_name, "generateName": generate_name, "claimedAt": at}


class Placement:
    """One HamiPodPlacement, read-only. `body` is the object as the API server returned it."""

    __slots__ = ("body",)

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Placement) and other.body == self.body

    __hash__ = None  # type: ignore[assignment]  # equal by content, which may change

    def __repr__(self) -> str:
        return f"Placement({self.key}, phase={self.status.phase})"

    @property
    def _meta(self) -> dict[str, Any]:
        return self.body.get("metadata") or {}

    @property
    def name(self) -> str:
        return self._meta.get("name") or ""

    @property
    def namespace(self) -> str:
        return self._meta.get("namespace") or ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def uid(self) -> str:
        return self._meta.get("uid") or ""

    @property
    def generation(self) -> int:
        return int(self._meta.get("generation") or 1)

    @property
    def created_at(self) -> str:
        return self._meta.get("creationTimestamp") or ""

    @property
    def labels(self) -> dict[str, str]:
        return self._meta.get("labels") or {}

    @property
    def spec(self) -> Spec:
        return Spec(self.body.get("spec") or {})

    @property
    def status(self) -> Status:
        return Status(self.body.get("status") or {})

    @property
    def evictee(self) -> str:
        """The pod it evicts as `namespace/name`, or ''."""
        return f"{self.namespace}/{self.spec.evict_pod}" if self.spec.evict_pod else ""

    @property
    def spec_changed(self) -> bool:
        """Unclaimed, and its spec changed since it was validated (`observedGeneration` is the
        generation whose spec the status describes; the validation writes it)."""
        status = self.status
        return not status.claimed_by and self.generation > (status.observed_generation or self.generation)

    def age(self) -> float:
        return stamp_age(self.created_at)

    def expired(self, ttl: float, margin: float = 0.0) -> bool:
        """Pending, never claimed, and older than the TTL (minus `margin`): the Claimed=False Expired case."""
        status = self.status
        if ttl <= 0 or status.phase != s.PENDING or status.claimed_by or status.evicted_at:
            return False
        return self.age() > ttl - margin

    def same_workload(self, other: Placement) -> bool:
        """Both move pods of one workload: same namespace, same selector."""
        return self.namespace == other.namespace and self.spec.match_labels == other.spec.match_labels

    def check_transition(self, new_phase: str | None) -> None:
        """Raises status.IllegalTransition unless the state machine lets this placement's phase
        become `new_phase` (None: the phase stays)."""
        s.check_transition(self.key, self.status.phase, new_phase)

    def with_status(self, update: StatusUpdate | None = None, condition: s.Condition | None = None) -> Placement:
        """A copy with `update` applied and `condition` upserted; `observedGeneration` is set once."""
        body = copy.deepcopy(self.body)
        status = body.setdefault("status", {})
        if update is not None:
            status.update(update.as_status())
            status.setdefault("observedGeneration", self.generation)
        if condition is not None:
            s.set_condition(status, self.generation, condition)
        return Placement(body)


def stamp_age(stamp: str | None) -> float:
    """Seconds since a status stamp; a missing or unreadable one counts as just now (never expires)."""
    return (times.age_seconds(stamp) or 0.0) if stamp else 0.0

"""HamiPodPlacement status vocabulary: phases, condition types, and the standard condition shape
(`type`, `status`, `reason`, `message`, `lastTransitionTime`, `observedGeneration`) the CRD declares.

| phase              | reached when                                                             |
|--------------------|--------------------------------------------------------------------------|
| (none)             | created, not validated yet                                               |
| Pending            | target validated (Validated=True); waiting to evict or for a pod to pin  |
| DeletingOldPod     | evictPod accepted by the Eviction API, or already gone (EvictionRequested) |
| Completed          | the pinned pod bound on nodeName using every named GPU (Scheduled=True)  |
| PartiallyCompleted | the pinned pod bound on nodeName on some of the named GPUs only          |
| Failed             | the condition of the step that failed is False and names the reason     |

Condition types and their reasons:
- Validated: TargetValid | InvalidSpec, DuplicateReqID, InvalidEvictee, InvalidTarget, TargetGone
- EvictionRequested: Evicted, AlreadyGone | DisruptionBudget (retrying), EvictionTimeout
- Claimed: PodAdmitted | Expired (TTL passed before any pod consumed the placement)
- ReplacementCreated: PodCreated | ReplacementTimeout
- Scheduled: BoundOnTarget, PartialAssignment | BindFailed, WrongTarget, BindTimeout
"""

from __future__ import annotations

from typing import Any

from hami_fast.descheduler import kube as k
from hami_fast.kube import times

PENDING, DELETING, PARTIAL, COMPLETED, FAILED = "Pending", "DeletingOldPod", "PartiallyCompleted", "Completed", "Failed"
FINAL = (PARTIAL, COMPLETED, FAILED)
OPEN = (PENDING, DELETING)

# Every phase change a placement may make, in one place; a final phase never changes. A Pending
# placement is validated again when its spec changes (Pending -> Pending); its pinned pod may bind
# before any eviction (no evictPod), hence Pending -> Completed/PartiallyCompleted.
TRANSITIONS: dict[str | None, frozenset[str]] = {
    None: frozenset({PENDING, FAILED}),
    PENDING: frozenset({PENDING, DELETING, PARTIAL, COMPLETED, FAILED}),
    DELETING: frozenset({PARTIAL, COMPLETED, FAILED}),
    PARTIAL: frozenset(),
    COMPLETED: frozenset(),
    FAILED: frozenset(),
}


class IllegalTransition(ValueError):
    """A write that would move a placement's phase where the state machine does not go."""


def check_transition(placement: dict[str, Any], new_phase: str | None) -> None:
    """Raises IllegalTransition unless `new_phase` (None: the phase stays) may follow the placement's."""
    old = (placement.get("status") or {}).get("phase") or None
    if new_phase is None or (new_phase == old and old not in FINAL):
        return
    if new_phase not in TRANSITIONS.get(old, frozenset()):
        meta = placement.get("metadata") or {}
        name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        raise IllegalTransition(f"placement {name}: phase {old or '(none)'} cannot become {new_phase}")


VALIDATED, EVICTION, CLAIMED, REPLACEMENT, SCHEDULED = (
    "Validated",
    "EvictionRequested",
    "Claimed",
    "ReplacementCreated",
    "Scheduled",
)

# Condition reasons, by condition type (the success reasons first).
# Validated
TARGET_VALID = "TargetValid"
INVALID_SPEC = "InvalidSpec"
DUPLICATE_REQ_ID = "DuplicateReqID"
INVALID_EVICTEE = "InvalidEvictee"
INVALID_TARGET = "InvalidTarget"
TARGET_GONE = "TargetGone"
# EvictionRequested
EVICTED = "Evicted"
ALREADY_GONE = "AlreadyGone"
DISRUPTION_BUDGET = "DisruptionBudget"
EVICTION_TIMEOUT = "EvictionTimeout"
# Claimed
POD_ADMITTED = "PodAdmitted"
EXPIRED = "Expired"
# ReplacementCreated
POD_CREATED = "PodCreated"
REPLACEMENT_TIMEOUT = "ReplacementTimeout"
# Scheduled
BOUND_ON_TARGET = "BoundOnTarget"
PARTIAL_ASSIGNMENT = "PartialAssignment"
BIND_FAILED = "BindFailed"
WRONG_TARGET = "WrongTarget"
BIND_TIMEOUT = "BindTimeout"
# The Validated=False reasons: the placement was refused, not failed while carried out.
REJECTED_REASONS = (INVALID_SPEC, DUPLICATE_REQ_ID, INVALID_EVICTEE, INVALID_TARGET, TARGET_GONE)

Condition = tuple[str, bool, str, str]  # type, status, reason, message


def set_condition(status: dict[str, Any], generation: int, condition: Condition) -> None:
    """Upsert one condition; `lastTransitionTime` moves only when its status flips."""
    kind, ok, reason, message = condition
    value = "True" if ok else "False"
    conditions = status.setdefault("conditions", [])
    entry = next((c for c in conditions if c.get("type") == kind), None)
    if entry is None:
        entry = {"type": kind}
        conditions.append(entry)
    if entry.get("status") != value or not entry.get("lastTransitionTime"):
        entry["lastTransitionTime"] = k.now_rfc3339()
    entry.update(status=value, reason=reason, message=message[:4096], observedGeneration=generation)


def spec_changed(placement: dict[str, Any]) -> bool:
    """Unclaimed, and its spec changed since it was validated (`observedGeneration` is the
    generation whose spec the status describes; the validation writes it)."""
    status = placement.get("status") or {}
    generation = int(placement["metadata"].get("generation") or 1)
    return not status.get("claimedBy") and generation > int(status.get("observedGeneration") or generation)


def condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def result_of(status: dict[str, Any]) -> str:
    """How a finished placement ended, as `hami_fast_descheduler_moves_total{result}` counts it."""
    phase = status.get("phase")
    if phase == COMPLETED:
        return "completed"
    if phase == PARTIAL:
        return "partially_completed"
    failed = [c for c in status.get("conditions") or [] if c.get("status") == "False"]
    reasons = {c.get("reason") for c in failed}
    if EXPIRED in reasons:
        return "expired"
    if reasons & set(REJECTED_REASONS):
        return "rejected"
    return "failed"


def stamp_age(stamp: str | None) -> float:
    """Seconds since a status stamp; a missing or unreadable one counts as just now (never expires)."""
    return (times.age_seconds(stamp) or 0.0) if stamp else 0.0


def expired(placement: dict[str, Any], ttl: float, margin: float = 0.0) -> bool:
    """Pending, never claimed, and older than the TTL (minus `margin`): the Claimed=False Expired case."""
    status = placement.get("status") or {}
    if ttl <= 0 or status.get("phase") != PENDING or status.get("claimedBy") or status.get("evictedAt"):
        return False
    return stamp_age(placement["metadata"].get("creationTimestamp")) > ttl - margin

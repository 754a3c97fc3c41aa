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
- ReplacementCreated: PodCreated, CreatedWithoutPin | ReplacementTimeout
- Scheduled: BoundOnTarget, PartialAssignment | BindFailed, WrongTarget, BindTimeout
"""

from __future__ import annotations

from typing import Any

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


def check_transition(name: str, old: str | None, new: str | None) -> None:
    """Raises IllegalTransition unless phase `new` (None: the phase stays) may follow `old`
    on placement `name` (`namespace/name`)."""
    if new is None or (new == old and old not in FINAL):
        return
    if new not in TRANSITIONS.get(old, frozenset()):
        raise IllegalTransition(f"placement {name}: phase {old or '(none)'} cannot become {new}")


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
CREATED_WITHOUT_PIN = "CreatedWithoutPin"
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
        entry["lastTransitionTime"] = times.now()
    entry.update(status=value, reason=reason, message=message[:4096], observedGeneration=generation)


# The audit Event posted on a placement whose phase becomes one of these: (type, reason). A Failed
# one carries the failed condition's reason instead.
TARGET_VALIDATED_EVENT, EVICTED_EVENT, COMPLETED_EVENT, PARTIAL_EVENT, FAILED_EVENT = (
    "TargetValidated",
    "Evicted",
    "Completed",
    "PartiallyCompleted",
    "Failed",
)
PHASE_EVENTS = {
    PENDING: ("Normal", TARGET_VALIDATED_EVENT),
    DELETING: ("Normal", EVICTED_EVENT),
    COMPLETED: ("Normal", COMPLETED_EVENT),
    PARTIAL: ("Normal", PARTIAL_EVENT),
    FAILED: ("Warning", FAILED_EVENT),
}
# Event reason: a disruption budget refused the first eviction attempt (it is retried with backoff).
EVICTION_BLOCKED_EVENT = "EvictionBlocked"

"""PodDisruptionBudgets over a preemption's victims taken together. A dry-run eviction checks one pod
against the budget as it stands; two victims under one budget that allows a single disruption both
pass it, and the second real eviction is refused after the first pod is gone for nothing. So before
evicting, the Ready victims each budget covers are counted against its `status.disruptionsAllowed`
(the eviction API spends a budget only on Ready pods)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Shortfall:
    """A budget that cannot pay for the victims it covers."""

    budget: str  # namespace/name
    needed: int
    allowed: int

    def message(self) -> str:
        return (
            f"the PodDisruptionBudget {self.budget} allows {self.allowed} disruption(s) "
            f"and {self.needed} of the victims are under it"
        )


def _expression_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False  # an operator the API server would have refused: match nothing


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector as policy/v1 reads it: null matches no pod, `{}` every pod."""
    if selector is None:
        return False
    wanted = selector.get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in wanted.items()):
        return False
    return all(_expression_matches(e, labels) for e in selector.get("matchExpressions") or [])


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def shortfall(victims: Iterable[dict[str, Any]], budgets: Iterable[dict[str, Any]]) -> Shortfall | None:
    """The first budget (by name) whose Ready victims outnumber the disruptions it allows, else None."""
    ready = [v for v in victims if is_ready(v)]
    for pdb in sorted(budgets, key=lambda b: (b["metadata"].get("namespace", ""), b["metadata"]["name"])):
        meta = pdb["metadata"]
        under = [
            v
            for v in ready
            if v["metadata"].get("namespace") == meta.get("namespace")
            and selector_matches((pdb.get("spec") or {}).get("selector"), v["metadata"].get("labels") or {})
        ]
        allowed = int((pdb.get("status") or {}).get("disruptionsAllowed") or 0)
        if len(under) > max(allowed, 1):
            return Shortfall(f"{meta.get('namespace')}/{meta['name']}", len(under), allowed)
    return None

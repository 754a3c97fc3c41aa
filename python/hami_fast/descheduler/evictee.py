"""What the controller reads of the pods a placement names: may `spec.evictPod` be evicted, and
which devices did the pinned replacement get."""

from __future__ import annotations

from typing import Any

from hami_fast.descheduler import kube as k
from hami_fast.descheduler.placement import Placement


def controller_owner(pod: dict[str, Any]) -> dict[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def evictee_problem(placement: Placement, pod: dict[str, Any] | None, scheduler_name: str) -> str:
    """Why `spec.evictPod` may not be evicted for this placement, or ''."""
    spec = placement.spec
    what = f"spec.evictPod: pod {placement.evictee}"
    if pod is None:
        return f"{what} not found"
    if not spec.selects((pod.get("metadata") or {}).get("labels") or {}):
        return f"{what} does not match spec.podSelector (matchLabels {spec.match_labels})"
    owner = controller_owner(pod)
    if owner is None:
        return f"{what} is a bare pod (no controller owner): it would not be recreated, so it is not evicted"
    if owner.get("kind") in ("DaemonSet", "Node"):
        return f"{what} is a {owner['kind']} pod and is not evicted"
    if (pod.get("spec") or {}).get("schedulerName") != scheduler_name:
        return f"{what} does not use schedulerName {scheduler_name}: its replacement would not be pinned"
    return ""


def allocated_devices(annotations: dict[str, str]) -> set[str]:
    """The devices a bound pod was given, every backend's: the UUIDs of HAMi's allocation lists
    (`uuid,type,mem,cores:` per device, `;` between containers)."""
    lists = [v for key, v in annotations.items() if k.is_allocation_list(key)]
    return {entry.split(",")[0] for value in lists for slot in value.split(";") for entry in slot.split(":") if entry}

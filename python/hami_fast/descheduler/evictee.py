"""What the controller reads of the pods a placement names: may `spec.evictPod` be evicted, and
which devices did the pinned replacement get."""

from __future__ import annotations

import logging
from typing import Any

import orjson

from hami_fast import _native
from hami_fast.descheduler import kube as k
from hami_fast.descheduler.placement import Placement

log = logging.getLogger("hami_fast.descheduler.controller")


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
    """The devices a bound pod was given, every backend's: the UUIDs of HAMi's allocation lists,
    read by the engine's codec (HAMi's DecodePodDevices). A list it cannot read gives none."""
    used: set[str] = set()
    for key, value in annotations.items():
        if not k.is_allocation_list(key):
            continue
        try:
            containers = orjson.loads(_native.decode_pod_devices(value))
        except _native.EngineError as exc:
            log.warning("pod allocation %s unreadable: %s", key, exc)
            continue
        used.update(device["uuid"] for devices in containers for device in devices)
    return used

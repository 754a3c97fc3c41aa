"""What the controller reads of the pods a placement names: may `spec.evictPod` be evicted (the
engine decides, this reports), and which devices did the pinned replacement get."""

from __future__ import annotations

import logging
from typing import Any

import orjson

from hami_fast import _native
from hami_fast.descheduler import kube as k
from hami_fast.descheduler.placement import Placement
from hami_fast.descheduler.view import ClusterView

log = logging.getLogger("hami_fast.descheduler.controller")


def evictee_problem(placement: Placement, pod: dict[str, Any] | None, view: ClusterView, scheduler_name: str) -> str:
    """Why `spec.evictPod` may not be evicted for this placement, or ''. Whether the pod may be
    evicted at all (its owner, its scheduler) is the engine's call."""
    spec = placement.spec
    what = f"spec.evictPod: pod {placement.evictee}"
    if pod is None:
        return f"{what} not found"
    if not spec.selects((pod.get("metadata") or {}).get("labels") or {}):
        return f"{what} does not match spec.podSelector (matchLabels {spec.match_labels})"
    refusal = view.evictee_refusal(pod, scheduler_name)
    return f"{what} {refusal}" if refusal else ""


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

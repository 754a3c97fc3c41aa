"""`kubectl hami why POD`: the engine's verdict for a pod of the live cluster, node by node."""

from __future__ import annotations

import json
from typing import Any

import orjson

from hami_fast import annotations as keys
from hami_fast.explain import document, render_with_headroom
from hami_fast.kubectl.live import Snapshot

ALLOCATED_NODE = keys.VGPU_NODE


def header(pod: dict[str, Any]) -> str:
    meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
    where = spec.get("nodeName") or meta.get("annotations", {}).get(ALLOCATED_NODE)
    state = status.get("phase", "Pending") + (f" on {where}" if where else "")
    pending = [c.get("message", "") for c in status.get("conditions", []) if c.get("reason") == "Unschedulable"]
    lines = [
        f"pod {meta.get('namespace', 'default')}/{meta['name']}: {state}, scheduler {spec.get('schedulerName', '-')}"
    ]
    if pending:
        lines.append(f"kube-scheduler: {pending[0]}")
    if where:
        lines.append("(its own allocation is set aside: this is where it would go if submitted now)")
    return "\n".join(lines)


def why(snap: Snapshot, pod: dict[str, Any], output: str, top: int, all_nodes: bool) -> str:
    body = orjson.dumps(pod)
    result = {**document(snap.cluster, body, None, None), "warnings": snap.warnings}
    if output == "json":
        return json.dumps(result, sort_keys=True)
    warnings = "".join(f"warning: {w}\n" for w in snap.warnings)
    warnings += "".join(f"note: {n}\n" for n in result["notes"])
    if result["error"]:  # a pod the webhook denies or hami-fast does not schedule: said, not raised
        return warnings + header(pod) + f"\n\nerror: {result['error']}"
    return warnings + header(pod) + "\n\n" + render_with_headroom(snap.cluster, body, result, top, all_nodes)

"""`hami-fast explain`: where would this pod go, and why not elsewhere."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import orjson

from hami_fast._native import Cluster
from hami_fast.manifests import as_list_bytes, load_objects, load_one


def explain(
    snapshot: str, pod_path: str, node_policy: str | None, gpu_policy: str | None, now: int | None = None
) -> dict[str, Any]:
    cluster = Cluster()
    # Each object is applied on its own: one malformed resident pod is skipped with a warning, as
    # HAMi and the watch path skip it, instead of failing the whole snapshot.
    _, _, _, errors = cluster.apply_list_page(as_list_bytes(load_objects(snapshot)))
    pod = load_one(pod_path, "Pod")
    answer = cluster.explain(
        orjson.dumps(pod, default=str), int(time.time()) if now is None else now, node_policy, gpu_policy
    )
    result = orjson.loads(answer)
    result["warnings"] = [f"{snapshot}: skipped {error}" for error in errors]
    return result


def render_text(result: dict[str, Any]) -> str:
    if result["error"]:
        return f"error: {result['error']}"
    lines = [f"chosen node: {result['node'] or '(none: the pod fits nowhere)'}"]
    for key, value in result["annotations"].items():
        lines.append(f"  {key}: {value}")
    rows = [(name, f"{score:.2f}", "fits") for name, score in result["scores"].items()]
    rows += [(name, "-", reason) for name, reason in result["failed"].items()]
    rows.sort()
    width = max([len("NODE")] + [len(r[0]) for r in rows])
    lines.append("")
    lines.append(f"{'NODE':<{width}}  {'SCORE':>6}  RESULT")
    for name, score, outcome in rows:
        mark = "*" if name == result["node"] else " "
        lines.append(f"{name:<{width}}  {score:>6}  {outcome}{'  <- chosen' if mark == '*' else ''}")
    return "\n".join(lines)


def run(args: Any) -> int:
    result = explain(args.snapshot, args.pod, args.node_scheduler_policy, args.gpu_scheduler_policy)
    for warning in result["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    if args.output == "json":
        print(json.dumps(result, sort_keys=True))
    else:
        print(render_text(result))
    return 1 if result["error"] else 0

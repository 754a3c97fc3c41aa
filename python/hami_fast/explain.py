"""`hami-fast explain`: where would this pod go, and why not elsewhere.

The verdicts, scores, ranking and headroom all come from the engine; this module only renders them.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from typing import Any

import orjson

from hami_fast._native import Cluster
from hami_fast.manifests import as_list_bytes, load_objects, load_one, require_nodes


def explain(
    snapshot: str,
    pod_path: str,
    node_policy: str | None,
    gpu_policy: str | None,
    now: int | None = None,
    config: bytes | None = None,
) -> dict[str, Any]:
    cluster, pod, warnings = load(snapshot, pod_path, config)
    return {**decide(cluster, pod, node_policy, gpu_policy, now), "warnings": warnings}


def decide(
    cluster: Cluster, pod: bytes, node_policy: str | None, gpu_policy: str | None, now: int | None = None
) -> dict[str, Any]:
    """The engine's explain object for `pod` (JSON bytes of a Pod as submitted)."""
    return orjson.loads(cluster.explain(pod, int(time.time()) if now is None else now, node_policy, gpu_policy))


def load(snapshot: str, pod_path: str, config: bytes | None = None) -> tuple[Cluster, bytes, list[str]]:
    """The snapshot in an engine Cluster, the pod as JSON bytes, and one warning per object skipped.

    Each object is applied on its own: one malformed resident pod is skipped with a warning, as
    HAMi and the watch path skip it, instead of failing the whole snapshot."""
    objects = require_nodes(load_objects(snapshot), snapshot)
    cluster = Cluster(config)
    _, _, _, errors = cluster.apply_list_page(as_list_bytes(objects))
    warnings = [f"{snapshot}: skipped {error}" for error in errors]
    return cluster, orjson.dumps(load_one(pod_path, "Pod"), default=str), warnings


def reason_keys(reason: str) -> list[str]:
    """`"1/4 CardInsufficientMemory, 3/4 X"` -> `["CardInsufficientMemory", "X"]`; a bare reason as it is."""
    keys = []
    for part in reason.split(", "):
        count, _, key = part.partition(" ")
        keys.append(key if key and "/" in count else part)
    return keys


def failures_by_reason(failed: dict[str, str]) -> list[tuple[str, list[str]]]:
    """Reason key -> the nodes failing for it, most common first (a node counts under each of its reasons)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for node, reason in sorted(failed.items()):
        for key in dict.fromkeys(reason_keys(reason)):
            groups[key].append(node)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _names(nodes: list[str], shown: int = 3) -> str:
    more = f", … {len(nodes) - shown} more" if len(nodes) > shown else ""
    return ", ".join(nodes[:shown]) + more


def render_text(result: dict[str, Any], top: int = 5, all_nodes: bool = False) -> str:
    if result["error"]:
        return f"error: {result['error']}"
    chosen, scores, failed = result["node"], result["scores"], result["failed"]
    ranked = result.get("ranked") or sorted(scores)
    total = len(scores) + len(failed)
    policy = result.get("node_policy", "")
    if chosen:
        lines = [f"chosen node: {chosen} (score {scores[chosen]:.2f}; node policy {policy})"]
        lines += [f"  {key}: {value}" for key, value in result["annotations"].items()]
    else:
        lines = [f"chosen node: none — the pod fits on none of {_plural(total, 'node')}"]
    if all_nodes:
        return "\n".join(lines + ["", *_every_node(result, ranked)])
    if ranked:
        shown = ranked[: max(top, 1)]
        lines += ["", f"top candidates ({len(shown)} of {_plural(len(ranked), 'fitting node')}, best first):"]
        width = max(len(n) for n in shown)
        for name in shown:
            lines.append(f"  {name:<{width}}  {scores[name]:>8.2f}{'  <- chosen' if name == chosen else ''}")
    if failed:
        lines += ["", f"not fitting ({_plural(len(failed), 'node')}), by reason:"]
        groups = failures_by_reason(failed)
        width = max(len(k) for k, _ in groups)
        for key, nodes in groups:
            lines.append(f"  {key:<{width}}  {_plural(len(nodes), 'node'):>9}: {_names(nodes)}")
    if len(ranked) > top or failed:
        lines += ["", "(--all lists every node with its full reason)"]
    return "\n".join(lines)


def _every_node(result: dict[str, Any], ranked: list[str]) -> list[str]:
    rows = [(name, f"{result['scores'][name]:.2f}", "fits") for name in ranked]
    rows += [(name, "-", reason) for name, reason in sorted(result["failed"].items())]
    width = max([len("NODE")] + [len(r[0]) for r in rows])
    lines = [f"{'NODE':<{width}}  {'SCORE':>8}  RESULT"]
    for name, score, outcome in rows:
        lines.append(f"{name:<{width}}  {score:>8}  {outcome}{'  <- chosen' if name == result['node'] else ''}")
    return lines


def _gpu(free: dict[str, Any] | None, unit: str) -> str:
    return f"{free['free']}{unit} on {free['node']}/{free['gpu']}" if free else "none (no usable GPU)"


def render_headroom(headroom: dict[str, Any]) -> list[str]:
    """What would have to change, per container, from the engine's headroom facts."""
    if headroom.get("error"):
        return [f"error: {headroom['error']}"]
    lines = []
    for c in headroom["containers"]:
        memory = f"{c['memory_mib']} MiB" if c["memory_mib"] else f"{c['memory_percentage']}% of a GPU's memory"
        need = f"{c['nums']} GPU{'s' if c['nums'] != 1 else ''} with {memory} and {c['cores']}% cores each"
        label = f"{'init ' if c['init'] else ''}container {c['container']}"
        blocking = c["blocking"]
        if not blocking:
            most = c["most_gpus_with_room"]
            lines.append(f"{label}: needs {need}; {most['node']} has {most['count']} such GPUs free")
            continue
        lines.append(f"{label}: needs {need}")
        if "memory" in blocking:
            lines.append(f"  needs {memory} on one GPU; the largest free is {_gpu(c['largest_free_memory'], ' MiB')}")
        if "cores" in blocking:
            lines.append(
                f"  needs {c['cores']}% cores on one GPU; the most free is {_gpu(c['largest_free_cores'], '%')}"
            )
        if "slots" in blocking:
            lines.append("  every usable GPU has all its sharing slots taken (device plugin --device-split-count)")
        if "gpus" in blocking and not {"memory", "cores", "slots"} & set(blocking):
            most = c["most_gpus_with_room"]
            where = f"the most on one node is {most['count']} on {most['node']}" if most else "no node has any"
            lines.append(f"  needs {c['nums']} such GPUs on one node; {where}")
    return lines


def render_with_headroom(cluster: Cluster, pod: bytes, result: dict[str, Any], top: int, all_nodes: bool) -> str:
    """The text report; for a pod that fits nowhere, followed by what would have to change."""
    text = render_text(result, top=top, all_nodes=all_nodes)
    if result["error"] or result["node"]:
        return text
    lines = render_headroom(orjson.loads(cluster.headroom(pod)))
    return text + "\n\nwhat would have to change:\n" + "\n".join("  " + line for line in lines)


def run(args: Any) -> int:
    from hami_fast import device_config

    cluster, pod, warnings = load(args.snapshot, args.pod, device_config.from_args(args).engine_config())
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    result = decide(cluster, pod, args.node_scheduler_policy, args.gpu_scheduler_policy)
    if args.output == "json":
        print(json.dumps(result, sort_keys=True))
    else:
        print(render_with_headroom(cluster, pod, result, args.top, args.all))
    return 1 if result["error"] else 0

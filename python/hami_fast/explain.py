"""`hami-fast explain`: where would this pod go, and why not elsewhere.

The verdicts, scores, ranking and headroom all come from the engine; this module only renders them.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import orjson

from hami_fast import annotations as keys
from hami_fast._native import Cluster, EngineError

if TYPE_CHECKING:
    from hami_fast._native import Explain, Headroom
from hami_fast.manifests import as_list_bytes, load_objects, load_one, require_nodes


def explain(
    snapshot: str,
    pod_path: str,
    node_policy: str | None,
    gpu_policy: str | None,
    now: int | None = None,
    config: bytes | None = None,
) -> dict[str, Any]:
    """`--output json`'s document of `pod` on `snapshot`, with the warnings of the objects skipped."""
    cluster, pod, warnings = load(snapshot, pod_path, config)
    return {**document(cluster, pod, node_policy, gpu_policy, now), "warnings": warnings}


def decide(
    cluster: Cluster, pod: bytes, node_policy: str | None, gpu_policy: str | None, now: int | None = None
) -> Explain:
    """The engine's explain object for `pod` (JSON bytes of a Pod as submitted); EngineError for a pod
    the webhook denies or hami-fast does not schedule."""
    out = cluster.explain(pod, int(time.time()) if now is None else now, node_policy, gpu_policy)
    return cast("Explain", orjson.loads(out))


#: `--output json` of a pod the engine refuses: nothing placed, and why (`error`; empty otherwise).
REFUSED: dict[str, Any] = {
    "node": None,
    "annotations": {},
    "failed": {},
    "scores": {},
    "ranked": [],
    "node_policy": "",
    "verdicts": {},
    "notes": [],
}


def document(
    cluster: Cluster, pod: bytes, node_policy: str | None, gpu_policy: str | None, now: int | None = None
) -> dict[str, Any]:
    """The explain object as `--output json` writes it: with `error`, the engine's refusal (one line)
    or empty."""
    try:
        return {**decide(cluster, pod, node_policy, gpu_policy, now), "error": ""}
    except EngineError as exc:
        return {**REFUSED, "error": str(exc)}


def load(snapshot: str, pod_path: str, config: bytes | None = None) -> tuple[Cluster, bytes, list[str]]:
    """The snapshot in an engine Cluster, the pod as JSON bytes, and one warning per object skipped.

    Each object is applied on its own: one malformed resident pod is skipped with a warning, as
    HAMi and the watch path skip it, instead of failing the whole snapshot."""
    objects = require_nodes(load_objects(snapshot), snapshot)
    cluster = Cluster(config)
    _, _, _, errors = cluster.apply_list_page(as_list_bytes(objects))
    warnings = [f"{snapshot}: skipped {error}" for error in errors]
    return cluster, orjson.dumps(load_one(pod_path, "Pod"), default=str), warnings


@dataclass
class VerdictGroup:
    """The failing nodes one reason decides (each node in exactly one group)."""

    reason: str
    detail: str
    nodes: list[str] = field(default_factory=list)
    #: Nodes of the group whose other GPUs failed for other reasons too, and those reasons.
    several: int = 0
    others: list[str] = field(default_factory=list)


def failures_by_verdict(result: dict[str, Any]) -> list[VerdictGroup]:
    """The engine's one verdict per failing node, grouped by reason (and cause), most nodes first:
    the groups' sizes add up to the failing nodes."""
    groups: dict[tuple[str, str], VerdictGroup] = {}
    for node, verdict in sorted(result["verdicts"].items()):
        key = (verdict["reason"], verdict.get("detail", ""))
        group = groups.setdefault(key, VerdictGroup(*key))
        group.nodes.append(node)
        if verdict["others"]:
            group.several += 1
            group.others += [r for r in verdict["others"] if r not in group.others]
    return sorted(groups.values(), key=lambda g: (-len(g.nodes), g.reason, g.detail))


def also(group: VerdictGroup) -> str:
    """`" (2 of them also have CardInsufficientCore on other GPUs)"`, or nothing when no node has several reasons."""
    if not group.several:
        return ""
    others = " and ".join(group.others)
    if len(group.nodes) == 1:
        return f" (it also has {others} on other GPUs)"
    whom = "all of them have" if group.several == len(group.nodes) else f"{group.several} of them also have"
    return f" ({whom} {others} on other GPUs)"


def verdict_summary(result: dict[str, Any]) -> str:
    """One line: `"33 NodeInsufficientDevice, 16 CardInsufficientMemory (50 nodes)"`."""
    groups = failures_by_verdict(result)
    parts = ", ".join(f"{len(g.nodes)} {g.reason}" for g in groups)
    return f"{parts} ({_plural(sum(len(g.nodes) for g in groups), 'node')})"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _names(nodes: list[str], shown: int = 3) -> str:
    more = f", … {len(nodes) - shown} more" if len(nodes) > shown else ""
    return ", ".join(nodes[:shown]) + more


def render_text(result: dict[str, Any], top: int = 5, all_nodes: bool = False) -> str:
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
        lines += ["", f"not fitting ({_plural(len(failed), 'node')}), by the reason that decides each node:"]
        groups = failures_by_verdict(result)
        width = max(len(g.reason) for g in groups)
        for g in groups:
            lines.append(f"  {g.reason:<{width}}  {_plural(len(g.nodes), 'node'):>9}: {_names(g.nodes)}{also(g)}")
            if g.detail:
                lines.append(f"  {'':<{width}}  {'':>9}  {g.detail}")
    if len(ranked) > top or failed:
        lines += ["", "(--all lists every node with its full reason)"]
    return "\n".join(lines)


def _every_node(result: dict[str, Any], ranked: list[str]) -> list[str]:
    rows = [(name, f"{result['scores'][name]:.2f}", "fits") for name in ranked]
    details = {name: v.get("detail") for name, v in result["verdicts"].items()}
    rows += [
        (name, "-", reason + (f" ({details[name]})" if details.get(name) else ""))
        for name, reason in sorted(result["failed"].items())
    ]
    width = max([len("NODE")] + [len(r[0]) for r in rows])
    lines = [f"{'NODE':<{width}}  {'SCORE':>8}  RESULT"]
    for name, score, outcome in rows:
        lines.append(f"{name:<{width}}  {score:>8}  {outcome}{'  <- chosen' if name == result['node'] else ''}")
    return lines


def _gpu(free: dict[str, Any] | None, unit: str) -> str:
    return f"{free['free']}{unit} on {free['node']}/{free['gpu']}" if free else "none (no usable GPU)"


def _why_no_usable_gpu(c: dict[str, Any]) -> str:
    if not c["largest_gpu"]:
        return f"no node has a GPU registered with HAMi (annotation {keys.NODE_REGISTER})"
    return "every registered GPU is unhealthy or cordoned"


def _larger_than_any_gpu(c: dict[str, Any]) -> str:
    largest = c["largest_gpu"]
    if not largest:
        return f"no node has a GPU registered with HAMi (annotation {keys.NODE_REGISTER})"
    return (
        f"no GPU in the cluster is that large: the largest has {largest['free']} MiB "
        f"({largest['node']}/{largest['gpu']})"
    )


def headroom(cluster: Cluster, pod: bytes) -> Headroom:
    """The engine's headroom facts for `pod`; EngineError for a pod the webhook denies."""
    return cast("Headroom", orjson.loads(cluster.headroom(pod)))


def render_headroom(headroom: dict[str, Any]) -> list[str]:
    """What would have to change, per container, from the engine's headroom facts."""
    return [line for c in headroom["containers"] for line in _container_headroom(c, headroom["gpus"])]


def _container_headroom(c: dict[str, Any], usable_gpus: int) -> list[str]:
    memory = f"{c['memory_mib']} MiB" if c["memory_mib"] else f"{c['memory_percentage']}% of a GPU's memory"
    need = f"{_plural(c['nums'], 'GPU')} with {memory} and {c['cores']}% cores each"
    label = f"{'init ' if c['init'] else ''}container {c['container']}"
    if not c["blocking"]:
        most = c["most_gpus_with_room"]
        return [f"{label}: needs {need}; {most['node']} has {most['count']} such GPUs free"]
    if not usable_gpus:
        return [f"{label}: needs {need}", f"  no GPU in the cluster is usable: {_why_no_usable_gpu(c)}"]
    return [f"{label}: needs {need}", *("  " + line for line in _blocking(c, memory))]


def _blocking(c: dict[str, Any], memory: str) -> list[str]:
    """One line per resource no GPU (or node) offers."""
    blocking, lines = set(c["blocking"]), []
    if "capacity" in blocking:
        lines.append(f"needs {memory} on one GPU; {_larger_than_any_gpu(c)}")
    if "memory" in blocking:
        lines.append(f"needs {memory} on one GPU; the largest free is {_gpu(c['largest_free_memory'], ' MiB')}")
    if "cores" in blocking:
        lines.append(f"needs {c['cores']}% cores on one GPU; the most free is {_gpu(c['largest_free_cores'], '%')}")
    if "slots" in blocking:
        lines.append("every usable GPU has all its sharing slots taken (device plugin --device-split-count)")
    if "node_size" in blocking:
        most = c["most_gpus_on_a_node"]
        lines.append(
            f"needs {_plural(c['nums'], 'GPU')} on one node; no node has that many usable GPUs: "
            f"the most is {most['count']} on {most['node']}"
        )
    if "gpus" in blocking and not {"memory", "capacity", "cores", "slots"} & blocking:
        most = c["most_gpus_with_room"]
        where = f"the most on one node is {most['count']} on {most['node']}" if most else "no node has any"
        lines.append(f"needs {c['nums']} such GPUs on one node; {where}")
    return lines


def render_with_headroom(cluster: Cluster, pod: bytes, result: dict[str, Any], top: int, all_nodes: bool) -> str:
    """The text report; for a pod that fits nowhere, followed by what would have to change."""
    text = render_text(result, top=top, all_nodes=all_nodes)
    if result["node"]:
        return text
    try:
        lines = render_headroom(dict(headroom(cluster, pod)))
    except EngineError as exc:
        lines = [f"error: {exc}"]
    if lines:
        text += "\n\nwhat would have to change:\n" + "\n".join("  " + line for line in lines)
    else:  # the headroom facts are worked out for NVIDIA vGPU requests
        text += "\n\nwhat would have to change: see each node's reason above (the cluster-wide advice covers NVIDIA vGPU requests)"
    preemption = render_preemption(result.get("preemption"))
    return text + ("\n\n" + "\n".join(preemption) if preemption else "")


def render_preemption(report: dict[str, Any] | None) -> list[str]:
    """Whether evicting lower-priority pods would unblock the pod, and which (the engine's choice).
    Nothing for a pod of priority 0 or less that preemption would not help: most pods have no
    priority, and saying so for each would be noise."""
    if not report:
        return []
    priority = report["priority"]
    if not report["possible"] and priority <= 0:
        return []
    if not report["possible"]:
        return [f"preemption (priority {priority}): would not unblock it: {report['reason']}"]
    victims = report["victims"]
    gpus = ", ".join(report["gpus"])
    head = (
        f"preemption (priority {priority}): would unblock it on {report['node']} ({gpus}) by evicting "
        f"{_plural(len(victims), 'lower-priority pod')}:"
    )
    return [head, *(f"  {v['namespace']}/{v['name']} (priority {v['priority']})" for v in victims)]


#: `hami-fast explain`'s exit status, for scripts (documented in the README).
FITS, FITS_NOWHERE, BAD_INPUT = 0, 1, 2


def exit_status(result: dict[str, Any]) -> int:
    return FITS if result["node"] else FITS_NOWHERE


def run(args: Any) -> int:
    """Exit 0: the pod fits (a node is chosen); 1: it fits nowhere; 2: bad input (a file, a flag,
    or a pod the webhook rejects or hami-fast does not schedule)."""
    from hami_fast import device_config

    cluster, pod, warnings = load(args.snapshot, args.pod, device_config.from_args(args).engine_config())
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.output == "json":
        result = document(cluster, pod, args.node_scheduler_policy, args.gpu_scheduler_policy)
        print_notes(result["notes"])
        print(json.dumps(result, sort_keys=True))
        return BAD_INPUT if result["error"] else exit_status(result)
    placed = decide(cluster, pod, args.node_scheduler_policy, args.gpu_scheduler_policy)
    print_notes(placed["notes"])
    print(render_with_headroom(cluster, pod, dict(placed), args.top, args.all))
    return FITS if placed["node"] else FITS_NOWHERE


def print_notes(notes: list[str]) -> None:
    for note in notes:
        print(f"note: {note}", file=sys.stderr)

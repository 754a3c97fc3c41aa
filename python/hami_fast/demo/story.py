"""The demo's summary: what was placed where, how full the GPUs are, one pending pod explained, latency.

Every figure is read from the engine (usage, fragmentation, explain, headroom); this module only adds
up and formats them.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson

from hami_fast import annotations as keys
from hami_fast._native import Cluster
from hami_fast.demo.cluster import KINDS, pod_kind
from hami_fast.demo.driver import Outcome
from hami_fast.explain import also, failures_by_verdict, render_headroom, verdict_summary

ALLOCATED = keys.ALLOCATED


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return [fmt(header), *(fmt(r) for r in rows)]


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "-"


def cluster_line(usage: list[dict[str, Any]]) -> str:
    models = Counter(d["type"] for n in usage for d in n["devices"])
    gpus = sum(models.values())
    kinds = ", ".join(f"{count} × {model}" for model, count in models.most_common())
    return f"Cluster: {len(usage)} GPU nodes, {gpus} GPUs ({kinds})."


def _requested_gpus(pod: dict[str, Any]) -> int:
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    return int(limits.get("nvidia.com/gpu", 0))


def by_kind(outcomes: list[Outcome]) -> str:
    rows = []
    for kind in KINDS:
        mine = [o for o in outcomes if pod_kind(o.pod["metadata"]["name"]) == kind]
        if not mine:
            continue
        status = Counter(o.status for o in mine)
        nodes = {o.node for o in mine if o.node}
        gpus = sum(_requested_gpus(o.pod) for o in mine if o.status == "bound")
        rows.append(
            [
                kind,
                str(len(mine)),
                str(status["bound"]),
                str(status["pending"]),
                str(status["denied"]),
                str(gpus),
                str(len(nodes)),
            ]
        )
    header = ["POD KIND", "PODS", "BOUND", "PENDING", "DENIED", "GPUS BOUND", "NODES"]
    return "\n".join(["Pods by kind:", *("  " + line for line in _table(header, rows))])


def utilisation(usage: list[dict[str, Any]], fragmentation: dict[str, Any]) -> str:
    devices = [d for n in usage for d in n["devices"]]
    mem, used_mem = sum(d["devmem"] for d in devices), sum(d["usedmem"] for d in devices)
    cores, used_cores = sum(d["devcore"] for d in devices), sum(d["usedcores"] for d in devices)
    slots, used_slots = sum(d["count"] for d in devices), sum(d["used"] for d in devices)
    busy = sum(1 for d in devices if d["used"])
    nodes_used = sum(1 for n in usage if any(d["used"] for d in n["devices"]))
    rows = [
        ["GPU memory", f"{used_mem / 1024:,.0f} of {mem / 1024:,.0f} GiB", _pct(used_mem, mem)],
        ["GPU cores", f"{used_cores:,} of {cores:,} %-units", _pct(used_cores, cores)],
        ["sharing slots", f"{used_slots:,} of {slots:,}", _pct(used_slots, slots)],
        ["GPUs in use", f"{busy} of {len(devices)}", _pct(busy, len(devices))],
        ["nodes in use", f"{nodes_used} of {len(usage)}", _pct(nodes_used, len(usage))],
    ]
    frag = (
        f"Fragmentation: {fragmentation['fragmentation']:.1f} GPUs of idle capacity that typical pods cannot use"
        f" ({fragmentation['fragmentation_pct_of_idle']:.1f} % of idle); {fragmentation['free_whole_gpus']} whole GPUs free."
    )
    return "\n".join(
        ["Allocated (hami-fast's accounting):", *("  " + line for line in _table(["", "", ""], rows)[1:]), frag]
    )


def pending_explained(cluster: Cluster, outcomes: list[Outcome], now: int) -> str:
    pending = [o for o in outcomes if o.status == "pending"]
    if not pending:
        return "No pod is pending: every demo pod found a GPU."
    # The largest request is the most instructive one to explain.
    pick = max(pending, key=lambda o: (_requested_gpus(o.pod), o.pod["metadata"]["name"]))
    pod = orjson.dumps(pick.pod)
    result = orjson.loads(cluster.explain(pod, now))
    headroom = orjson.loads(cluster.headroom(pod))
    name = pick.pod["metadata"]["name"]
    are = "pod is" if len(pending) == 1 else "pods are"
    lines = [f"{len(pending)} {are} pending. Why {name} fits nowhere (hami-fast explain), one reason per node:"]
    lines += verdict_lines(result)
    lines += ["  " + line for line in render_headroom(headroom)]
    return "\n".join(lines)


def verdict_lines(result: dict[str, Any], shown: int = 5) -> list[str]:
    """The failing nodes by the reason that decides each, adding up to the nodes examined."""
    groups = failures_by_verdict(result)
    lines = [f"  {_count(len(g.nodes))}: {g.reason}{also(g)}" for g in groups[:shown]]
    rest = sum(len(g.nodes) for g in groups[shown:])
    if rest:
        lines.append(f"  {_count(rest)}: other reasons (hami-fast explain --all lists each node)")
    examined = len(result["failed"]) + len(result["scores"])
    lines.append(f"  {_count(examined)} examined, none fits")
    return lines


def _count(n: int) -> str:
    return f"{n:>3} node{'' if n == 1 else 's'}"


def latency(values: dict[str, list[float]], median: Callable[[list[float]], float]) -> str:
    rows = []
    for route, samples in values.items():
        if samples:
            ordered = sorted(samples)
            p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
            rows.append([f"/{route}", str(len(samples)), f"{median(samples) * 1e3:.2f} ms", f"{p99 * 1e3:.2f} ms"])
    table = _table(["ROUTE", "CALLS", "MEDIAN", "P99"], rows)
    return "\n".join(["Latency over HTTP (client side, one connection):", *("  " + line for line in table)])


def next_steps(argv0: str) -> str:
    on_path = shutil.which("hami-fast")
    here = os.path.dirname(os.path.abspath(argv0))
    lines = ["Next:"]
    if not on_path or os.path.dirname(os.path.abspath(on_path)) != here:
        lines.append(f"  hami-fast is in {here}, not on your PATH: `source {here}/activate`, or `make install-user`")
    steps = [
        ("hami-fast explain --snapshot examples/snapshot.yaml --pod examples/pod.yaml", ""),
        ("hami-fast serve --snapshot examples/snapshot.yaml", "then POST /filter to 127.0.0.1:8080"),
        ("hami-fast descheduler --snapshot examples/snapshot.yaml", "then open http://127.0.0.1:8083/: the GPU map"),
        ("hami-fast demo --verbose", "one line per pod"),
    ]
    width = max(len(command) for command, note in steps if note)
    lines += [f"  {command:<{width}} ({note})" if note else f"  {command}" for command, note in steps]
    return "\n".join(lines)


def raw_lines(outcomes: list[Outcome], memory: Any, cluster: Cluster, now: int) -> list[str]:
    """One line per pod: its allocation annotation, or why it is pending (as the cluster is now)."""
    lines = []
    for o in outcomes:
        meta = o.pod["metadata"]
        if o.node:
            stored = memory.get_pod(meta["namespace"], meta["name"])
            detail = stored["metadata"].get("annotations", {}).get(ALLOCATED, "")
        elif o.status == "pending" and not o.detail:
            detail = "pending: " + verdict_summary(orjson.loads(cluster.explain(orjson.dumps(o.pod), now)))
        else:
            detail = f"{o.status}: {o.detail}"
        lines.append(f"{meta['name']:<24} -> {o.node or '-':<13} {detail}")
    return lines

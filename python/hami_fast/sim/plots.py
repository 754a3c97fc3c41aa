"""Figures of replay results (matplotlib, Agg backend, PNG)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hami_fast import annotations as keys

COLORS = {
    "random": "#9e9e9e",
    "dotprod": "#8c564b",
    "clustering": "#9467bd",
    "packing": "#2ca02c",
    "bestfit": "#1f77b4",
    "fgd": "#d62728",
    "binpack": "#ff7f0e",
    "spread": "#17becf",
    "fgd-balance": "#000000",
}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ValueError("figures need matplotlib: pip install 'hami-fast[plot]'") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _curve(
    results: Sequence[dict[str, Any]], key: str, xs: range
) -> tuple[list[int], list[float], list[float], list[float]]:
    """Median and 25/75 % quantiles over runs of a ``*_by_arrived`` curve, on the x where all runs have a value."""
    out_x, med, lo, hi = [], [], [], []
    for x in xs:
        vals = [r[key][str(x)] for r in results if str(x) in r[key]]
        if len(vals) != len(results) or not vals:
            continue
        out_x.append(x)
        med.append(statistics.median(vals))
        if len(vals) > 1:
            q = statistics.quantiles(vals, n=4, method="inclusive")
            lo.append(q[0])
            hi.append(q[2])
        else:
            lo.append(vals[0])
            hi.append(vals[0])
    return out_x, med, lo, hi


def _by_policy(results: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(r["policy"], []).append(r)
    return groups


def plot_allocation(results: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Fig. 9(a) style: allocated % vs arrived % (left) and unallocated % vs arrived % from 75 %
    (right), median over seeds with the 25–75 % band, per policy, with the ideal lines."""
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for policy, rs in _by_policy(results).items():
        c = COLORS.get(policy)
        x, med, lo, hi = _curve(rs, "alloc_pct_by_arrived", range(0, 131))
        ax1.plot(x, med, label=policy, color=c, lw=1.5)
        x2 = [v for v in x if v >= 75]
        un = [100 - m for v, m in zip(x, med) if v >= 75]
        un_lo = [100 - h for v, h in zip(x, hi) if v >= 75]
        un_hi = [100 - low for v, low in zip(x, lo) if v >= 75]
        ax2.plot(x2, un, label=policy, color=c, lw=1.5)
        ax2.fill_between(x2, un_lo, un_hi, color=c, alpha=0.2, lw=0)
    ideal_x = list(range(0, 131))
    ax1.plot(ideal_x, [min(v, 100) for v in ideal_x], "k--", lw=1, label="ideal")
    ax2.plot(list(range(75, 131)), [max(100 - v, 0) for v in range(75, 131)], "k--", lw=1, label="ideal")
    ax1.set(xlabel="arrived workload (% of GPU capacity)", ylabel="allocated GPU (%)", xlim=(0, 130), ylim=(0, 105))
    ax2.set(xlabel="arrived workload (% of GPU capacity)", ylabel="unallocated GPU (%)", xlim=(75, 130), ylim=(0, 30))
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    ax2.legend(fontsize=8, ncol=2)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def plot_fragmentation(results: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Fig. 7 style: fragment as % of all GPUs (left, with the 25–75 % band) and as % of idle GPUs
    (right) vs arrived %, median over seeds; the ideal is no fragment at all."""
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for policy, rs in _by_policy(results).items():
        c = COLORS.get(policy)
        x, med, lo, hi = _curve(rs, "frag_pct_by_arrived", range(0, 131))
        ax1.plot(x, med, label=policy, color=c, lw=1.5)
        ax1.fill_between(x, lo, hi, color=c, alpha=0.2, lw=0)
        x, med, _, _ = _curve(rs, "frag_ratio_by_arrived", range(0, 131))
        ax2.plot(x, med, label=policy, color=c, lw=1.5)
    ax1.axhline(0, color="k", ls="--", lw=1, label="ideal (no fragment)")
    ax1.set(
        xlabel="arrived workload (% of GPU capacity)", ylabel="fragment / all GPUs (%)", xlim=(0, 130), ylim=(-0.5, 25)
    )
    ax2.set(
        xlabel="arrived workload (% of GPU capacity)", ylabel="fragment / idle GPUs (%)", xlim=(0, 130), ylim=(0, 105)
    )
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    ax1.legend(fontsize=8, ncol=2)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def plot_bars(
    agg: dict[tuple[str, str], dict[str, float]],
    traces: Sequence[str],
    policies: Sequence[str],
    path: str | Path,
    title: str = "",
    bounds: dict[str, float] | None = None,
) -> Path:
    """Figs. 11–12 style: unallocated % at 100 % arrived, mean ± sd over seeds, a bar group per
    trace, FGD's value labelled; with ``bounds`` the offline lower bound as a black line per group."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(traces) + 2), 4.5))
    width = 0.8 / max(len(policies), 1)
    for j, policy in enumerate(policies):
        xs, means, sds = [], [], []
        for i, t in enumerate(traces):
            a = agg.get((t, policy))
            if a is None:
                continue
            xs.append(i + (j - (len(policies) - 1) / 2) * width)
            means.append(a["mean"])
            sds.append(a["sd"])
        bars = ax.bar(xs, means, width, yerr=sds, capsize=2, label=policy, color=COLORS.get(policy))
        if policy in ("fgd", "fgd-balance"):
            ax.bar_label(bars, labels=[f"{m:.1f}" for m in means], fontsize=8, padding=2)
    for i, t in enumerate(traces):
        if bounds and t in bounds:
            ax.hlines(bounds[t], i - 0.42, i + 0.42, colors="k", lw=2, label="lower bound" if i == 0 else None)
    ax.set_xticks(range(len(traces)), list(traces))
    ax.set(ylabel="unallocated GPU (%) at 100 % arrived")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=3)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return _save(fig, path)


def plot_idle_breakdown(snapshots: dict[str, dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Where the idle GPU capacity is at 100 % arrived, per policy (a replay snapshot each, a
    Kubernetes List): whole free GPUs or GPU slices, on nodes with CPU left for a GPU pod or
    not (less than the smallest CPU request of the GPU pods placed)."""
    plt = _pyplot()
    kinds = ["whole GPUs, CPU left", "whole GPUs, no CPU left", "GPU slices, CPU left", "GPU slices, no CPU left"]
    colors = ["#2ca02c", "#98df8a", "#1f77b4", "#aec7e8"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    policies = list(snapshots)
    bottoms = [0.0] * len(policies)
    parts: dict[str, list[float]] = {k: [] for k in kinds}
    for snap in snapshots.values():
        b = idle_breakdown(snap)
        for k in kinds:
            parts[k].append(b[k])
    for k, c in zip(kinds, colors):
        ax.bar(policies, parts[k], bottom=bottoms, color=c, label=k)
        bottoms = [x + y for x, y in zip(bottoms, parts[k])]
    for i, total in enumerate(bottoms):
        ax.text(i, total + 3, f"{total:.0f}", ha="center", fontsize=9)
    ax.set(ylabel="idle GPUs at 100 % arrived")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return _save(fig, path)


def _quantity(text: str) -> int:
    return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)


def idle_breakdown(snapshot: dict[str, Any]) -> dict[str, float]:
    """Idle GPUs (in GPUs) of a replay snapshot by kind (see :func:`plot_idle_breakdown`)."""
    items = snapshot["items"]
    nodes = {i["metadata"]["name"]: i for i in items if i["kind"] == "Node"}
    cpu_used: dict[str, int] = {}
    gpu_used: dict[str, dict[str, int]] = {}
    min_gpu_pod_cpu = None
    for p in (i for i in items if i["kind"] == "Pod"):
        node = p["spec"].get("nodeName")
        cpu = sum(_quantity(c["resources"]["requests"]["cpu"]) for c in p["spec"]["containers"])
        cpu_used[node] = cpu_used.get(node, 0) + cpu
        allocated = p["metadata"].get("annotations", {}).get(keys.ALLOCATED)
        if allocated:
            min_gpu_pod_cpu = cpu if min_gpu_pod_cpu is None else min(min_gpu_pod_cpu, cpu)
            for dev in allocated.split(";")[0].split(":"):
                if dev:
                    uuid, _, mem, _ = dev.split(",")
                    gpu_used.setdefault(node, {})[uuid] = gpu_used.get(node, {}).get(uuid, 0) + int(mem)
    out = dict.fromkeys(
        ["whole GPUs, CPU left", "whole GPUs, no CPU left", "GPU slices, CPU left", "GPU slices, no CPU left"], 0.0
    )
    for name, n in nodes.items():
        import json as _json

        devices = _json.loads(n["metadata"]["annotations"][keys.NODE_REGISTER])
        cpu_left = _quantity(n["status"]["allocatable"]["cpu"]) - cpu_used.get(name, 0)
        starved = "no CPU left" if cpu_left < (min_gpu_pod_cpu or 0) else "CPU left"
        for d in devices:
            free = (d["devmem"] - gpu_used.get(name, {}).get(d["id"], 0)) / d["devmem"]
            if free >= 1:
                out[f"whole GPUs, {starved}"] += 1
            elif free > 0:
                out[f"GPU slices, {starved}"] += free
    return out


def plot_run(result: dict[str, Any], path: str | Path) -> Path:
    """One replay: allocation and fragmentation vs arrived, with the ideal lines."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    alloc = result["alloc_pct_by_arrived"]
    frag = result.get("frag_pct_by_arrived", {})
    xs = sorted(int(k) for k in alloc)
    ax.plot(xs, [alloc[str(x)] for x in xs], label="allocated GPU %", color=COLORS.get(result["policy"], "C0"))
    fx = sorted(int(k) for k in frag)
    ax.plot(fx, [frag[str(x)] for x in fx], label="fragment % of GPUs", color="C1")
    ax.plot(xs, [min(x, 100) for x in xs], "k--", lw=1, label="ideal allocation")
    ax.set(
        xlabel="arrived workload (% of GPU capacity)",
        ylabel="% of cluster GPUs",
        title=f"{result.get('trace', '')} · {result['policy']} · seed {result['seed']}: {result['unallocated_pct_at_100']}% unallocated at 100%",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path: str | Path) -> Path:
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

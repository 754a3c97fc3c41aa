"""Figures of replay results (matplotlib, Agg backend, PNG)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

COLORS = {
    "random": "#9e9e9e",
    "dotprod": "#8c564b",
    "clustering": "#9467bd",
    "packing": "#2ca02c",
    "bestfit": "#1f77b4",
    "fgd": "#d62728",
    "binpack": "#ff7f0e",
    "spread": "#17becf",
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
) -> Path:
    """Figs. 11–12 style: unallocated % at 100 % arrived, mean ± sd over seeds, a bar group per
    trace, FGD's value labelled."""
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
        if policy == "fgd":
            ax.bar_label(bars, labels=[f"{m:.1f}" for m in means], fontsize=8, padding=2)
    ax.set_xticks(range(len(traces)), list(traces))
    ax.set(ylabel="unallocated GPU (%) at 100 % arrived")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=3)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return _save(fig, path)


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

"""Tables of sweep results, with the published values next to the reproduced ones."""

from __future__ import annotations

from typing import Any

from hami_fast.sim.published import FIDELITY_BOUND_PP, FIDELITY_POLICIES, UNALLOCATED_AT_100
from hami_fast.sim.runner import POLICIES

TRACE_ORDER = [
    "default",
    "gpushare20",
    "gpushare40",
    "gpushare60",
    "gpushare80",
    "gpushare100",
    "multigpu20",
    "multigpu30",
    "multigpu40",
    "multigpu50",
]


def _trace_key(name: str) -> tuple[int, str, float]:
    """Paper order; a generated variant (``default-spec10``, see ``hami_fast.sim.gpuspec``) after
    its trace, by share."""
    base, _, share = name.partition("-spec")
    try:
        pct = float(share) if share else 0.0
    except ValueError:
        base, pct = name, 0.0
    return (TRACE_ORDER.index(base), base, pct) if base in TRACE_ORDER else (len(TRACE_ORDER), base, pct)


def rows(agg: dict[tuple[str, str], dict[str, float]]) -> list[dict[str, Any]]:
    """One row per (trace, policy) in a stable order, with the published mean and the difference."""
    out = []
    for trace, policy in sorted(
        agg, key=lambda k: (_trace_key(k[0]), POLICIES.index(k[1]) if k[1] in POLICIES else 99)
    ):
        a = agg[(trace, policy)]
        published = UNALLOCATED_AT_100.get(trace, {}).get(policy)
        diff = None if published is None else round(a["mean"] - published, 2) + 0.0
        within = None if diff is None or policy not in FIDELITY_POLICIES else abs(diff) <= FIDELITY_BOUND_PP
        out.append(
            {
                "trace": trace,
                "policy": policy,
                "runs": int(a["n"]),
                "mean": round(a["mean"], 2),
                "sd": round(a["sd"], 2),
                "median": round(a["median"], 2),
                "published": published,
                "diff": diff,
                "within_bound": within,
                "failed": round(a["failed"], 1),
                "elapsed_s": round(a["elapsed_s"], 3),
            }
        )
    return out


def markdown(table: list[dict[str, Any]]) -> str:
    """Long table: one line per (trace, policy)."""
    head = "| trace | policy | runs | unallocated % (mean ± sd) | published mean | diff (pp) | failed pods | s / run |"
    sep = "|---|---|---:|---:|---:|---:|---:|---:|"
    lines = [head, sep]
    for r in table:
        pub = "—" if r["published"] is None else f"{r['published']:.2f}"
        diff = "—" if r["diff"] is None else f"{r['diff']:+.2f}" + (" ✗" if r["within_bound"] is False else "")
        lines.append(
            f"| {r['trace']} | {r['policy']} | {r['runs']} | {r['mean']:.2f} ± {r['sd']:.2f} | {pub} | {diff} | {r['failed']:.0f} | {r['elapsed_s']:.2f} |"
        )
    return "\n".join(lines)


def wide_markdown(
    table: list[dict[str, Any]], policies: list[str] | None = None, bounds: dict[str, float] | None = None
) -> str:
    """Wide table as the paper prints it: a row per trace, ``reproduced (published)`` per policy;
    with ``bounds`` (trace -> mean bound, see ``hami_fast.sim.bound``) a first column of the bound."""
    policies = policies or [p for p in POLICIES if any(r["policy"] == p for r in table)]
    by = {(r["trace"], r["policy"]): r for r in table}
    traces = sorted({r["trace"] for r in table}, key=_trace_key)
    first = ["bound"] if bounds else []
    lines = ["| trace | " + " | ".join(first + policies) + " |", "|---|" + "---:|" * (len(policies) + len(first))]
    for t in traces:
        cells = [f"{bounds[t]:.2f}" if t in bounds else "—"] if bounds else []
        for p in policies:
            r = by.get((t, p))
            if r is None:
                cells.append("")
                continue
            cell = f"{r['mean']:.2f}"
            if r["published"] is not None:
                cell += f" ({r['published']:.2f})"
            if r["within_bound"] is False:
                cell += " ✗"
            cells.append(cell)
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def wide_caption(table: list[dict[str, Any]], bounds: dict[str, float] | None = None) -> str:
    """What the wide table's cells are: it has no other legend."""
    runs = sorted({r["runs"] for r in table})
    seeds = f"{runs[0]} seed{'s' if runs[0] != 1 else ''}" if len(runs) == 1 else f"{runs[0]}-{runs[-1]} seeds"
    text = (
        f"Unallocated GPU % at 100 % of capacity arrived (lower is better), mean over {seeds} per cell; "
        f"in parentheses the FGD paper's published mean; ✗ marks a deterministic policy more than "
        f"{FIDELITY_BOUND_PP} pp from it."
    )
    if bounds:
        text += " bound: the offline lower bound of the trace."
    return text


def gap_markdown(table: list[dict[str, Any]], bounds: dict[str, float], policies: list[str] | None = None) -> str:
    """How far each policy is above the lower bound (pp), a row per trace with a bound."""
    policies = policies or [p for p in POLICIES if any(r["policy"] == p for r in table)]
    by = {(r["trace"], r["policy"]): r for r in table}
    traces = sorted({r["trace"] for r in table if r["trace"] in bounds}, key=_trace_key)
    lines = ["| trace | bound | " + " | ".join(policies) + " |", "|---|---:|" + "---:|" * len(policies)]
    for t in traces:
        cells = [f"{by[(t, p)]['mean'] - bounds[t]:+.2f}" if (t, p) in by else "" for p in policies]
        lines.append(f"| {t} | {bounds[t]:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


GAP_CAPTION = "Distance to the lower bound: policy's mean unallocated GPU % minus the bound (pp)."

LONG_CAPTION = "Per trace and policy: unallocated GPU % at 100 % arrived, the published mean and the difference."


def load_bounds(path: str) -> dict[str, float]:
    """``docs/results/bound.json`` (``python -m hami_fast.sim.bound --out``) -> trace -> mean bound."""
    import json
    from pathlib import Path

    return {b["trace"]: b["mean"] for b in json.loads(Path(path).read_text())}


def text_summary(result: dict[str, Any]) -> str:
    """Human-readable summary of one run."""
    alloc = result["alloc_pct_by_arrived"]
    frag = result.get("frag_pct_by_arrived", {})
    lines = [
        f"trace {result.get('trace', '?')}: policy {result['policy']}, seed {result['seed']}, tune {result.get('tune', '?')}",
        f"  pods attempted {result['pods']} (tuning {result.get('tuned', 0):+d}), failed {result['failed']}, GPUs {result['total_gpus']}",
        f"  unallocated GPU % at 100 % arrived: {result['unallocated_pct_at_100']}",
        "  arrived %  allocated %  fragment % of GPUs",
    ]
    for x in ("50", "80", "90", "95", "100", "110", "120", "130"):
        if x in alloc:
            lines.append(f"  {x:>9}  {alloc[x]:>11.2f}  {frag.get(x, float('nan')):>18.2f}")
    lines.append(f"  replay time {result['elapsed_s']:.3f} s")
    return "\n".join(lines)

"""A lower bound on the unallocated GPU % at 100 % arrived that no policy can beat.

Under the replay protocol (one attempt per pod in arrival order, no departures) the GPU milli
allocated after event *e* is the GPU demand of a set of pods from the arrived prefix that fits
the cluster at once. So it is at most OPT(prefix_e), the most GPU milli that *any* packing of a
subset of that prefix can place — the offline optimum, which may even reject pods. This module
computes an upper bound on OPT with a relaxation solved by HiGHS, and turns it into a lower bound
on the metric exactly as the replay computes the metric (rounded per event, averaged over the
events whose rounded arrived % is 100, rounded again).

The relaxation (every real packing satisfies every constraint, so its optimum is ≥ OPT):
- nodes are grouped into classes of equal (CPU, memory, GPU count, model); pods into types of
  equal (CPU, memory, per-GPU milli, GPU count, allowed models); CPU-only pods are dropped (they
  only take CPU and memory); a type may use a class where one pod of it fits an empty node;
- per class: CPU, memory and GPU milli summed over the class's nodes;
- per class, *dual feasible functions* (Fekete & Schepers): for a DFF f, items whose sizes fit
  one bin have f-values summing to ≤ 1, so Σ f(item) ≤ number of bins. Applied per GPU (items =
  the per-GPU slots of each pod, bins = GPUs: e.g. two 600-milli slots never share a GPU) and per
  node (items = GPU share of the node, CPU share, memory share: e.g. one 8-GPU pod per 8-GPU node);
- x (pods of a type on a class) is integer; HiGHS's MIP *dual bound* is used, so a time limit
  never makes the bound invalid, only looser.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from hami_fast.sim.packing import (  # noqa: F401  (re-exported: the bound's relaxation)
    MILLI,
    NodeClass,
    PackingBound,
    PodType,
    _dffs,
    allowed,
    dff_eps,
    dff_round,
    max_gpu_milli,
)


def _round(x: float, digits: int) -> float:
    """The replay's rounding (ties to even at `digits` decimals)."""
    k = 10**digits
    return round(x * k) / k


def window(pods: list[list[Any]], total_gpus: int) -> tuple[list[int], list[int]]:
    """Cumulative arrived GPU milli after each pod, and the events the metric averages at 100 %
    (rounded arrived % = 100, else 99..101, as the replay's discretisation)."""
    arrived, acc = [], 0
    for p in pods:
        acc += int(p[2]) * int(p[3]) if p[2] > 0 and p[3] > 0 else 0
        arrived.append(acc)
    keys = [round(a / total_gpus / 10) for a in arrived]
    events = [i for i, k in enumerate(keys) if k == 100] or [i for i, k in enumerate(keys) if 99 <= k <= 101]
    return arrived, events


def solver(online: bool, levels: bool = False) -> Any:
    """The packing bound to use: any packing (``max_gpu_milli``), or the smallest of that and the
    bounds on a packing the protocol can reach (``online_bound``: a pod that fits when it arrives
    is placed; ``level_bound``: the same with each GPU's fill level kept over time). All are
    valid, so their minimum is."""
    if not online and not levels:
        return max_gpu_milli

    def tighter(pods: list[list[Any]], nodes: list[list[Any]], time_limit: float) -> PackingBound:
        from hami_fast.sim.level_bound import LEVEL_TIME_LIMIT, max_gpu_milli_levels
        from hami_fast.sim.online_bound import max_gpu_milli_online

        best = max_gpu_milli(pods, nodes, time_limit)
        spent = best["solve_s"]
        others = [(online, lambda: max_gpu_milli_online(pods, nodes, time_limit))]
        others.append((levels, lambda: max_gpu_milli_levels(pods, nodes, max(time_limit, LEVEL_TIME_LIMIT))))
        for wanted, solve in others:
            if not wanted:
                continue
            try:
                found = solve()
            except RuntimeError:  # no bound within the time limit: the others stand
                continue
            spent += found["solve_s"]
            best = found if found["bound"] <= best["bound"] else best
        return {**best, "solve_s": spent}

    return tighter


def seed_bound(
    arrivals: dict[str, Any], time_limit: float = 30.0, online: bool = False, levels: bool = False
) -> dict[str, Any]:
    """The bound on one seed's unallocated % at 100 % arrived, from ``_native.replay_arrivals``."""
    pods, nodes, total = arrivals["pods"], arrivals["nodes"], int(arrivals["total_gpus"])
    arrived, events = window(pods, total)
    if not events:
        raise ValueError("the trace never reaches 100 % arrived")
    first, last = events[0], events[-1]
    solve = solver(online, levels)
    opt_last = solve(pods[: last + 1], nodes, time_limit)
    opt_first = solve(pods[: first + 1], nodes, time_limit) if first != last else opt_last
    cap = total * MILLI
    allocs = []
    for e in events:
        ub = min(opt_last["bound"], opt_first["bound"] + (arrived[e] - arrived[first]), arrived[e], cap)
        allocs.append(_round(ub / total / 10, 2))
    mean = _round(statistics.fmean(allocs), 2)
    return {
        "seed": arrivals["seed"],
        "unallocated_pct_bound": _round(100 - mean, 2),
        "no_packing_loss_pct": _round(
            100 - _round(statistics.fmean(_round(min(arrived[e], cap) / total / 10, 2) for e in events), 2), 2
        ),
        "opt_last": opt_last,
        "opt_first": opt_first,
    }


def trace_bound(
    nodes_csv: Path,
    pods_csv: Path,
    seeds: list[int],
    tune: float = 1.3,
    time_limit: float = 30.0,
    online: bool = False,
    levels: bool = False,
) -> dict[str, Any]:
    from hami_fast import _native
    from hami_fast.sim.runner import trace_name

    rows = []
    for seed in seeds:
        raw = _native.replay_arrivals(
            nodes_csv.read_bytes(),
            pods_csv.read_bytes(),
            seed=seed,
            tune=tune,
            nodes_name=str(nodes_csv),
            pods_name=str(pods_csv),
        )
        rows.append(seed_bound(json.loads(raw), time_limit, online, levels))
    vals = [r["unallocated_pct_bound"] for r in rows]
    return {
        "trace": trace_name(str(pods_csv)),
        "seeds": seeds,
        "mean": statistics.fmean(vals),
        "per_seed": {str(r["seed"]): r["unallocated_pct_bound"] for r in rows},
        "solve_s": sum(r["opt_last"]["solve_s"] + r["opt_first"]["solve_s"] for r in rows),
        "all_optimal": all(
            r["opt_last"]["status"] == "Optimal" and r["opt_first"]["status"] == "Optimal" for r in rows
        ),
    }


def main(argv: list[str] | None = None) -> int:
    from hami_fast.sim.runner import parse_seeds

    p = argparse.ArgumentParser(prog="python -m hami_fast.sim.bound", description=__doc__.splitlines()[0])
    p.add_argument("--nodes", required=True, type=Path)
    p.add_argument("--pods", required=True, nargs="+", type=Path)
    p.add_argument("--seeds", default="42-51")
    p.add_argument("--tune", type=float, default=1.3)
    p.add_argument(
        "--time-limit", type=float, default=30.0, help="HiGHS seconds per solve (the dual bound stays valid)"
    )
    p.add_argument("--out", type=Path, default=None, help="write the per-trace bounds as JSON")
    p.add_argument(
        "--online",
        action="store_true",
        help="the tighter bound: a pod that fits when it arrives is placed (hami_fast.sim.online_bound)",
    )
    p.add_argument(
        "--levels",
        action="store_true",
        help="tighter still: per-GPU fill levels that persist over time (hami_fast.sim.level_bound)",
    )
    args = p.parse_args(argv)
    out = []
    for pods in args.pods:
        for path in (args.nodes, pods):
            if not path.is_file():
                print(f"bound: {path}: no such file", file=sys.stderr)
                return 2
        b = trace_bound(args.nodes, pods, parse_seeds(args.seeds), args.tune, args.time_limit, args.online, args.levels)
        print(
            f"{b['trace']:12} bound {b['mean']:.2f} %  per seed {b['per_seed']}  ({b['solve_s']:.1f} s, optimal={b['all_optimal']})"
        )
        out.append(b)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

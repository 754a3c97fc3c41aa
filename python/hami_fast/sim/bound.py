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
import math
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

MILLI = 1000


@dataclass(frozen=True)
class PodType:
    cpu: int
    mem: int
    milli: int
    gpus: int
    spec: str


@dataclass(frozen=True)
class NodeClass:
    cpu: int
    mem: int
    gpus: int
    model: str


def allowed(t: PodType, c: NodeClass) -> bool:
    """A pod of type t fits an empty node of class c (the replay's type filter: substrings of
    ``NVIDIA-<model>``, case-insensitive, so at least as permissive as the replay)."""
    if t.gpus > c.gpus or t.cpu > c.cpu or t.mem > c.mem:
        return False
    tokens = [s.upper() for s in t.spec.split("|") if s]
    return not tokens or any(s in f"NVIDIA-{c.model}".upper() for s in tokens)


def dff_eps(x: float, eps: float) -> float:
    """f_ε (valid for ε ≤ ½): 1 above 1−ε, 0 below ε, x between."""
    if x > 1 - eps + 1e-12:
        return 1.0
    if x < eps - 1e-12:
        return 0.0
    return x


def dff_round(x: float, k: int) -> float:
    """u^(k): x if (k+1)x is an integer, else ⌊(k+1)x⌋/k."""
    y = (k + 1) * x
    if abs(y - round(y)) < 1e-9:
        return x
    return math.floor(y) / k


def _dffs(sizes: list[float]) -> list[Any]:
    """The DFFs used: identity, f_ε for ε at each distinct size ≤ ½, u^(1..4)."""
    out: list[Any] = [lambda x: x]
    for eps in sorted({s for s in sizes if 0 < s <= 0.5}):
        out.append(lambda x, e=eps: dff_eps(x, e))
    for k in range(1, 5):
        out.append(lambda x, k=k: dff_round(x, k))
    return out


class PackingBound(TypedDict):
    """What :func:`max_gpu_milli` found."""

    bound: float
    incumbent: float
    solve_s: float
    variables: int
    status: str


def max_gpu_milli(pods: list[list[Any]], nodes: list[list[Any]], time_limit: float = 30.0) -> PackingBound:
    """An upper bound on the GPU milli any packing of a subset of ``pods`` onto ``nodes`` places.

    ``pods``: ``[cpu_milli, memory_mib, gpu_milli, num_gpu, gpu_spec]``; ``nodes``:
    ``[name, cpu_milli, memory_mib, gpus, model]``. ``incumbent`` is the best integer solution of
    the relaxation, ≥ OPT's relaxed value only as a measure of how tight the solve is.
    """
    import highspy
    import numpy as np

    types = Counter(
        PodType(int(p[0]), int(p[1]), int(p[2]), int(p[3]), str(p[4])) for p in pods if p[2] > 0 and p[3] > 0
    )
    classes = Counter(NodeClass(int(n[1]), int(n[2]), int(n[3]), str(n[4])) for n in nodes if n[3] > 0)
    tlist, clist = list(types), list(classes)
    pairs = [(i, j) for i, t in enumerate(tlist) for j, c in enumerate(clist) if allowed(t, c)]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_rel_gap", 1e-4)
    h.setOptionValue("threads", 1)
    inf = highspy.kHighsInf
    n_var = len(pairs)
    cost = np.array([float(tlist[i].milli * tlist[i].gpus) for i, _ in pairs])
    lower = np.zeros(n_var)
    upper = np.array([float(types[tlist[i]]) for i, _ in pairs])
    h.addVars(n_var, lower, upper)
    h.changeColsCost(n_var, np.arange(n_var, dtype=np.int32), cost)
    h.changeColsIntegrality(n_var, np.arange(n_var, dtype=np.int32), np.array([highspy.HighsVarType.kInteger] * n_var))
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)

    def row(entries: list[tuple[int, float]], ub: float) -> None:
        entries = [(k, v) for k, v in entries if v != 0.0]
        if entries:
            idx = np.array([k for k, _ in entries], dtype=np.int32)
            val = np.array([v for _, v in entries])
            h.addRow(-inf, float(ub), len(entries), idx, val)

    by_type: dict[int, list[int]] = {}
    by_class: dict[int, list[int]] = {}
    for k, (i, j) in enumerate(pairs):
        by_type.setdefault(i, []).append(k)
        by_class.setdefault(j, []).append(k)
    for i, ks in by_type.items():
        row([(k, 1.0) for k in ks], types[tlist[i]])
    for j, ks in by_class.items():
        c, count = clist[j], classes[clist[j]]
        ts = [tlist[pairs[k][0]] for k in ks]
        row([(k, float(t.cpu)) for k, t in zip(ks, ts)], count * c.cpu)
        row([(k, float(t.mem)) for k, t in zip(ks, ts)], count * c.mem)
        # Per GPU: each pod puts `gpus` slots of `milli` on distinct GPUs.
        for f in _dffs([t.milli / MILLI for t in ts]):
            row([(k, t.gpus * f(t.milli / MILLI)) for k, t in zip(ks, ts)], count * c.gpus)
        # Per node: the pod's share of the node's GPUs, CPU and memory.
        gpu_share = [t.gpus * t.milli / MILLI / c.gpus for t in ts]
        for f in _dffs(gpu_share)[1:]:
            row([(k, f(s)) for k, s in zip(ks, gpu_share)], count)
        for share in ([t.cpu / c.cpu for t in ts], [t.mem / c.mem for t in ts]):
            for f in [lambda x: dff_round(x, 1), lambda x: dff_round(x, 2)]:
                row([(k, f(s)) for k, s in zip(ks, share)], count)
    start = time.monotonic()
    h.run()
    info = h.getInfo()
    status = h.getModelStatus()
    # The dual bound, not the incumbent: "optimal" still allows mip_rel_gap below the optimum.
    bound = info.mip_dual_bound
    if not math.isfinite(bound):
        raise RuntimeError(f"HiGHS gave no bound ({h.modelStatusToString(status)})")
    return {
        "bound": float(bound),
        "incumbent": float(info.objective_function_value),
        "solve_s": time.monotonic() - start,
        "variables": n_var,
        "status": h.modelStatusToString(status),
    }


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


def solver(online: bool) -> Any:
    """The packing bound to use: any packing (``max_gpu_milli``), or the smaller of that and a
    packing the protocol can reach (``online_bound``: a pod that fits when it arrives is placed;
    both are valid, so their minimum is)."""
    if not online:
        return max_gpu_milli

    def tighter(pods: list[list[Any]], nodes: list[list[Any]], time_limit: float) -> PackingBound:
        from hami_fast.sim.online_bound import max_gpu_milli_online

        any_packing = max_gpu_milli(pods, nodes, time_limit)
        try:
            reachable = max_gpu_milli_online(pods, nodes, time_limit)
        except RuntimeError:  # no dual bound within the time limit: the any-packing one stands
            return any_packing
        best = reachable if reachable["bound"] <= any_packing["bound"] else any_packing
        return {**best, "solve_s": any_packing["solve_s"] + reachable["solve_s"]}

    return tighter


def seed_bound(arrivals: dict[str, Any], time_limit: float = 30.0, online: bool = False) -> dict[str, Any]:
    """The bound on one seed's unallocated % at 100 % arrived, from ``_native.replay_arrivals``."""
    pods, nodes, total = arrivals["pods"], arrivals["nodes"], int(arrivals["total_gpus"])
    arrived, events = window(pods, total)
    if not events:
        raise ValueError("the trace never reaches 100 % arrived")
    first, last = events[0], events[-1]
    solve = solver(online)
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
    nodes_csv: Path, pods_csv: Path, seeds: list[int], tune: float = 1.3, time_limit: float = 30.0, online: bool = False
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
        rows.append(seed_bound(json.loads(raw), time_limit, online))
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
    args = p.parse_args(argv)
    out = []
    for pods in args.pods:
        for path in (args.nodes, pods):
            if not path.is_file():
                print(f"bound: {path}: no such file", file=sys.stderr)
                return 2
        b = trace_bound(args.nodes, pods, parse_seeds(args.seeds), args.tune, args.time_limit, args.online)
        print(
            f"{b['trace']:12} bound {b['mean']:.2f} %  per seed {b['per_seed']}  ({b['solve_s']:.1f} s, optimal={b['all_optimal']})"
        )
        out.append(b)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

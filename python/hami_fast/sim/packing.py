"""The packing relaxation behind the bound (`bound.py`): node classes, pod types, dual feasible
functions, and the most GPU milli any packing of a set of pods can place (an upper bound found
with HiGHS's MIP dual bound). `online_bound.py` adds the constraints the replay protocol implies.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass
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

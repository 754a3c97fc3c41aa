"""A tighter lower bound: each GPU's fill level only grows, and a pod that fits when it arrives is placed.

``online_bound`` keeps only *counts* of placed pods per node class from one checkpoint to the
next, so between checkpoints it can re-pack everything in hindsight: drop early 810-milli slices
and give their GPUs to later whole-GPU pods. Here every GPU of a class has a fill level (GPU milli
in use, in steps of ``quantum``) that persists from checkpoint to checkpoint, as a time-expanded
arc flow per class:

- ``y[j][a]``: GPUs of the class at level ``a`` at checkpoint j (Σ_a = the class's GPUs; all at 0
  before the first pod);
- in step j (from checkpoint j−1 to j) an *item arc* ``a → a+s`` carries a GPU that takes a slice
  of s milli; a GPU may take several slices in one step (one arc after the other), and what ends
  the step at level a is ``y[j][a]``. The arcs of size s in step j add up to the slices of s placed
  on the class in that step (a pod of n GPUs is n slices). Any run of the protocol gives such a
  flow: follow each GPU through its slices of the step in arrival order.

On top of the placement counts of ``online_bound`` (monotone, at most the arrivals, CPU, memory,
pod slots and the per-node dual feasible functions at the last checkpoint), the rejection rule per
group g of GPU pods (GPU count n, allowed models, a band of per-GPU milli) with a binary
``z[g,j]`` (one of them was rejected by checkpoint j; monotone in j):

- pods of g rejected by j arrived at or after g's first rejection: rejected ≤ Σ_{j'≤j} z[g,j']·
  (arrivals of the step j'); so ``z = 0`` ⇒ all of g arrived by j are placed;
- ``z = 1`` ⇒ in every allowed class the GPUs at a level with room for g (its largest milli) are
  at most ``(n−1)·nodes`` + the roomy GPUs of nodes short of CPU, memory or pod slots for g
  (its largest CPU and memory). Nothing departs, so a node without room when the pod was
  rejected has none at j. Short nodes are bounded by what they hold: s nodes short of CPU use
  ≥ s·(CPU − cpu_g + 1) of it, and hold ≤ 1000·G·s − milli_g·R GPU milli if R of their GPUs
  have room; for λ ≥ 0 a pod's CPU ≤ λ·its GPU milli + max(0, CPU − λ·GPU milli), which gives
  one linear row per λ (likewise memory).

CPU-only pods get no rule (they may be rejected freely: only looser). Above ``mip_below`` pods the
binaries are relaxed to [0, 1] and the LP is solved by the interior point method: its optimum is
a bound too, and on the openb traces HiGHS's MIP dual bound did not move past the root LP within
minutes. Classes with fewer GPUs than ``min_gpus`` keep ``online_bound``'s pooled rows instead of
levels (fewer variables, still valid, only looser).
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from typing import Any

from hami_fast.sim.online_bound import (
    PODS_PER_NODE,
    capacity_cuts,
    capacity_rows,
    fits_empty,
    no_room_rows,
    pod_type,
    solved,
    stream_rows,
    usage_vars,
)
from hami_fast.sim.packing import MILLI, NodeClass, PackingBound, PodType

#: Checkpoints: arrived GPU milli as a share of capacity (denser or earlier ones did not move the
#: LP bound on ``default``; each adds a step of arcs).
LEVEL_SHARES = (0.9, 0.95, 0.97, 0.98, 0.99)
#: Seconds per level solve (the arc flow needs more than the pooled models).
LEVEL_TIME_LIMIT = 600.0
#: Short lists (tests, small clusters) get a checkpoint after every pod.
EVERY_POD = 40


class _Batch:
    """Columns and rows collected in Python, handed to HiGHS at once (the model has ~10⁵ arcs)."""

    def __init__(self, relax: bool = False) -> None:
        import highspy

        #: Binaries become continuous in [0, 1]: the LP's optimum is a (looser) bound too.
        self.relax = relax
        self.hs = highspy
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.cost: list[float] = []
        self.ints: list[int] = []
        self.rows: list[tuple[float, float, list[tuple[int, float]]]] = []
        self.n = 0
        #: The solution HiGHS ended with (for inspection).
        self.values: list[float] = []

    def var(self, lo: float, hi: float, cost: float = 0.0, integer: bool = False) -> int:
        self.lo.append(float(lo))
        self.hi.append(float(hi))
        self.cost.append(float(cost))
        if integer and not self.relax:
            self.ints.append(self.n)
        self.n += 1
        return self.n - 1

    def row(self, entries: list[tuple[int, float]], lo: float, hi: float) -> None:
        entries = [(k, float(v)) for k, v in entries if v != 0.0]
        if entries:
            self.rows.append((float(lo), float(hi), entries))

    def at_most(self, entries: list[tuple[int, float]], hi: float) -> None:
        self.row(entries, -self.hs.kHighsInf, hi)

    def at_least(self, entries: list[tuple[int, float]], lo: float) -> None:
        self.row(entries, lo, self.hs.kHighsInf)

    def solve(self, time_limit: float, **options: Any) -> PackingBound:
        import numpy as np

        h = self.hs.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("time_limit", float(time_limit))
        h.setOptionValue("mip_rel_gap", 1e-4)
        h.setOptionValue("threads", 1)
        if not self.ints:  # the interior point method is ~5x faster than simplex on the arc flow
            h.setOptionValue("solver", "ipm")
        for k, v in options.items():
            h.setOptionValue(k, v)
        h.addVars(self.n, np.array(self.lo), np.array(self.hi))
        h.changeColsCost(self.n, np.arange(self.n, dtype=np.int32), np.array(self.cost))
        if self.ints:
            kinds = np.array([self.hs.HighsVarType.kInteger] * len(self.ints))
            h.changeColsIntegrality(len(self.ints), np.array(self.ints, dtype=np.int32), kinds)
        h.changeObjectiveSense(self.hs.ObjSense.kMaximize)
        starts = np.cumsum([0] + [len(e) for _, _, e in self.rows[:-1]]).astype(np.int32)
        idx = np.array([k for _, _, e in self.rows for k, _ in e], dtype=np.int32)
        val = np.array([v for _, _, e in self.rows for _, v in e])
        lo = np.array([r[0] for r in self.rows])
        hi = np.array([r[1] for r in self.rows])
        h.addRows(len(self.rows), lo, hi, len(idx), starts, idx, val)
        start = time.monotonic()
        h.run()
        info, status = h.getInfo(), h.getModelStatus()
        self.values = list(h.getSolution().col_value)
        bound = info.mip_dual_bound if self.ints else info.objective_function_value
        if not math.isfinite(bound) or (not self.ints and status != self.hs.HighsModelStatus.kOptimal):
            raise RuntimeError(f"HiGHS gave no bound ({h.modelStatusToString(status)})")
        return solved(bound, info.objective_function_value, start, self.n, h.modelStatusToString(status))


def level_checkpoints(
    pods: list[list[Any]], capacity_milli: int, shares: tuple[float, ...] = LEVEL_SHARES
) -> list[int]:
    """Prefix lengths where the arrived GPU milli first reaches each share of capacity, then the
    whole list; after every pod for lists of at most ``EVERY_POD`` pods."""
    if len(pods) <= EVERY_POD:
        return list(range(1, len(pods) + 1))
    return capacity_cuts(pods, capacity_milli, shares, set())


class _Levels:
    """One class's time-expanded arc flow: ``y[j][a]`` and the item arcs of each step."""

    def __init__(self, m: _Batch, c: NodeClass, count: int, quantum: int, exact: bool) -> None:
        self.m, self.c, self.count, self.q = m, c, count, quantum
        self.top = MILLI // quantum
        #: A level's real milli may exceed level·quantum by up to this much.
        self.slack = 0 if exact else quantum - 1
        self.gpus = count * c.gpus
        self.y: list[list[int]] = []
        self.arcs: list[dict[int, list[int]]] = []

    def ends(self, a: int, milli: int) -> list[int]:
        """Levels a GPU at level a reaches by taking a slice of ``milli`` (two when rounding)."""
        if a * self.q + milli > MILLI:
            return []
        lo = a + milli // self.q
        out = [lo] + ([lo + 1] if milli % self.q else [])
        return [b for b in out if b <= self.top]

    def step(self, sizes: list[int]) -> None:
        """Add step j: its arcs for each slice size and the levels at its end."""
        m, prev = self.m, self.y[-1] if self.y else None
        y = [m.var(0, self.gpus) for _ in range(self.top + 1)]
        flow: list[list[tuple[int, float]]] = [[(y[a], -1.0)] for a in range(self.top + 1)]
        arcs: dict[int, list[int]] = {}
        for s in sizes:
            arcs[s] = []
            for a in range(self.top + 1):
                for b in self.ends(a, s):
                    f = m.var(0, self.gpus)
                    arcs[s].append(f)
                    flow[a].append((f, -1.0))
                    flow[b].append((f, 1.0))
        for a, entries in enumerate(flow):
            if prev is not None:
                entries.append((prev[a], 1.0))
            given = float(self.gpus) if prev is None and a == 0 else 0.0
            m.row(entries, -given, -given)
        self.y.append(y)
        self.arcs.append(arcs)

    def roomy(self, j: int, milli: int) -> list[tuple[int, float]]:
        """The GPUs that surely have room for ``milli`` at checkpoint j."""
        return [(self.y[j][a], 1.0) for a in range(self.top + 1) if a * self.q + self.slack + milli <= MILLI]


def max_gpu_milli_levels(
    pods: list[list[Any]],
    nodes: list[list[Any]],
    time_limit: float = LEVEL_TIME_LIMIT,
    quantum: int = 10,
    min_gpus: int = 0,
    shares: tuple[float, ...] = LEVEL_SHARES,
    band: int = 60,
    mip_below: int = 2000,
    **options: Any,
) -> PackingBound:
    """An upper bound on the GPU milli placed after the last of ``pods`` by any run of the
    protocol, with per-GPU levels for the classes of at least ``min_gpus`` GPUs."""
    classes = Counter(NodeClass(int(n[1]), int(n[2]), int(n[3]), str(n[4])) for n in nodes if int(n[3]) > 0)
    stream = [pod_type(p) for p in pods]
    cuts = level_checkpoints(pods, sum(c.gpus * n for c, n in classes.items()) * MILLI, shares)
    arrived = [Counter(stream[:j]) for j in cuts]
    tlist = list(arrived[-1])
    pairs = [(t, c) for t in tlist for c in classes if fits_empty(t, c)]
    m = _Batch(relax=len(pods) > mip_below)
    last = len(cuts) - 1
    x: dict[tuple[PodType, NodeClass, int], int] = {}
    for j in range(len(cuts)):
        for t, c in pairs:
            x[t, c, j] = m.var(0, arrived[j][t], t.milli * t.gpus if j == last else 0.0)
    exact = all(t.milli % quantum == 0 for t in tlist) and MILLI % quantum == 0
    levels = {c: _Levels(m, c, n, quantum, exact) for c, n in classes.items() if c.gpus * n >= min_gpus}
    stream_rows(m, x, pairs, tlist, arrived)
    capacity_rows(m, x, pairs, classes, last)
    for lv in levels.values():
        _level_rows(lv, x, pairs, arrived)
    _rejection_rows(m, x, pairs, classes, levels, _bands(tlist, band), arrived)
    return m.solve(time_limit, **options)


def _level_rows(lv: _Levels, x: dict[Any, int], pairs: list[tuple[PodType, NodeClass]], arrived: list[Counter]) -> None:
    """Each step's arcs of size s on the class = the slices of s placed on it in that step."""
    on_c = [t for t, c in pairs if c == lv.c and t.gpus > 0]
    for j in range(len(arrived)):
        placed: dict[int, list[tuple[int, float]]] = defaultdict(list)
        for t in on_c:
            placed[t.milli].append((x[t, lv.c, j], float(t.gpus)))
            if j > 0:
                placed[t.milli].append((x[t, lv.c, j - 1], -float(t.gpus)))
        lv.step(sorted(placed))
        for s, entries in placed.items():
            lv.m.row([(f, -1.0) for f in lv.arcs[j][s]] + entries, 0.0, 0.0)


def _bands(tlist: list[PodType], width: int) -> dict[tuple[int, str, int], list[PodType]]:
    """GPU pods grouped by GPU count, allowed models and a band of per-GPU milli (values at most
    ``width`` above the band's first). A rejected member means no room for the group's largest
    milli, CPU and memory either, so one binary per band serves all of it. CPU-only pods get no
    rule: they may be rejected freely, which only loosens the bound."""
    out: dict[tuple[int, str, int], list[PodType]] = defaultdict(list)
    for gpus, spec in {(t.gpus, t.spec) for t in tlist if t.gpus > 0}:
        start = -MILLI
        for t in sorted((t for t in tlist if (t.gpus, t.spec) == (gpus, spec)), key=lambda t: t.milli):
            if t.milli > start + width:
                start = t.milli
            out[gpus, spec, start].append(t)
    return out


def _rejection_rows(m: _Batch, x, pairs, classes, levels, groups, arrived) -> None:
    """z[g,j] = 1: a pod of g was rejected by checkpoint j, so no room for g anywhere at j.

    Pods of g that arrived before g's first rejection were placed, so those rejected by j arrived
    in the steps from the first with z = 1: rejected ≤ Σ_{j' ≤ j} z[g,j']·(arrived in step j')."""
    by_type = defaultdict(list)
    for t, c in pairs:
        by_type[t].append(c)
    prev: dict[Any, int] = {}
    history: dict[Any, list[tuple[int, int]]] = defaultdict(list)
    for j in range(len(arrived)):
        usage = usage_vars(m, x, pairs, list(classes), j)
        for g, ts in groups.items():
            n = {t: arrived[j][t] for t in ts if arrived[j][t] > 0}
            if not n:
                continue
            worst = _largest(list(n))
            z = m.var(0, 1, integer=True)
            if g in prev:
                m.at_least([(z, 1.0), (prev[g], -1.0)], 0.0)
            prev[g] = z
            history[g].append((j, z))
            for t, count in n.items():
                steps = [(zk, arrived[k][t] - (arrived[k - 1][t] if k else 0)) for k, zk in history[g]]
                m.at_least([(x[t, c, j], 1.0) for c in by_type[t]] + [(zk, float(a)) for zk, a in steps], count)
            for c, count in classes.items():
                if not fits_empty(worst, c):
                    continue
                if c in levels and worst.gpus > 0:
                    on_c = [(x[t, c2, j], t) for t, c2 in pairs if c2 == c]
                    _no_room_levels(m, levels[c], j, worst, z, on_c)
                else:
                    no_room_rows(m, usage[c], c, count, worst, z)


def _largest(ts: list[PodType]) -> PodType:
    """A pod as large as every one of ``ts`` in each dimension (they share GPU count and models)."""
    return PodType(max(t.cpu for t in ts), max(t.mem for t in ts), max(t.milli for t in ts), ts[0].gpus, ts[0].spec)


#: Multiples of a class's CPU (memory) per GPU milli used as λ in the short-node rows.
RATIOS = (0.0, 0.5, 1.0, 2.0)


def _no_room_levels(m: _Batch, lv: _Levels, j: int, g: PodType, z: int, on_c: list[tuple[int, PodType]]) -> None:
    """z = 1 ⇒ GPUs with room for g ≤ (n−1)·nodes + the roomy GPUs of nodes short of CPU,
    memory or pod slots for g."""
    c = lv.c
    short = [_short_rows(m, lv, g, on_c, dim, cap, cap - need + 1) for dim, cap, need in
             (("cpu", c.cpu, g.cpu), ("mem", c.mem, g.mem))]  # fmt: skip
    if PODS_PER_NODE * min((t.cpu for _, t in on_c), default=0) <= c.cpu:
        s_pods = m.var(0, lv.count)
        m.at_most([(s_pods, PODS_PER_NODE)] + [(k, -1.0) for k, _ in on_c], 0.0)
        short.append(m.var(0, lv.gpus))
        m.at_most([(short[-1], 1.0), (s_pods, -float(c.gpus))], 0.0)
    idle = lv.gpus - (g.gpus - 1) * lv.count
    m.at_most(lv.roomy(j, g.milli) + [(r, -1.0) for r in short] + [(z, float(idle))], float(lv.gpus))


def _short_rows(
    m: _Batch, lv: _Levels, g: PodType, on_c: list[tuple[int, PodType]], dim: str, cap: int, used: int
) -> int:
    """The roomy GPUs R on the s nodes of the class that have at least ``used`` of ``dim`` in use.

    Those nodes hold at most 1000·G·s − milli_g·R GPU milli (a roomy GPU has milli_g free), and
    for any λ ≥ 0 a pod's ``dim`` is at most λ·(its GPU milli) + max(0, its ``dim`` − λ·its GPU
    milli), so s·used ≤ λ·(1000·G·s − milli_g·R) + Σ_types max(0, dim − λ·milli)·placed."""
    s, r = m.var(0, lv.count), m.var(0, lv.gpus)
    m.at_most([(r, 1.0), (s, -float(lv.c.gpus))], 0.0)
    for ratio in RATIOS:
        lam = ratio * cap / (MILLI * lv.c.gpus)
        spill = [(k, -max(0.0, getattr(t, dim) - lam * t.milli * t.gpus)) for k, t in on_c]
        m.at_most([(s, used - lam * MILLI * lv.c.gpus), (r, lam * g.milli)] + spill, 0.0)
    return r

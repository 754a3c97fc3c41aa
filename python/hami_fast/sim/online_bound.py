"""A tighter lower bound: the relaxation of ``bound`` plus "a pod that fits when it arrives is placed".

``hami_fast.sim.bound`` bounds what *any* packing of the arrived pods could place, so its optimum
may reject an early 810-milli slice to give the GPU to a later whole-GPU pod. Under the replay
protocol that is impossible: a pod is rejected only if no node can take it *when it arrives*, and
since nothing departs, no node can take it at any later moment either. This module adds that rule
at a few checkpoints of the arrival stream (arrived 30 %, 40 %, …, 90 % of GPU capacity or of the
pods, and the prefix end):

- ``x[t,k,j]``: pods of type t on node class k by checkpoint j; non-decreasing in j (pods stay),
  at most the arrivals of t by j, and growing between checkpoints by at most the arrivals between;
- ``z[g,j]`` (binary): some pod of group g (types with the same GPU count, per-GPU milli and
  allowed models) arrived by j was rejected. If ``z = 0`` every pod of the group arrived by j is
  placed by j. If ``z = 1`` no node of an allowed class has room for the group at j: every such
  node either lacks CPU, memory or pod slots for it (*starved*), or has no GPU with enough free
  milli (for k GPUs: fewer than k). Per class that means, with ``s`` the starved nodes,
  ``s_cpu·(cpu − c_g + 1) ≤ CPU used`` (likewise memory and pods), and the GPUs of the other nodes
  each hold at least one slice and more than ``1000 − milli_g`` milli.

The group's cpu and memory are the largest of its types (a node without room for the type that
was rejected has no room for the largest either) and its milli the largest, so every constraint
holds for every run of the protocol, under any policy; the capacity constraints (CPU, memory,
GPU milli and the dual feasible functions) apply at the last checkpoint as in ``bound``. CPU-only
pods are part of the model here: they take the CPU that starves nodes, and one is rejected only
when every node is starved for it.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Protocol

from hami_fast.sim.packing import MILLI, NodeClass, PackingBound, PodType, _dffs, allowed, dff_round

#: Checkpoints: arrived GPU milli as a share of capacity, below the prefix end.
CHECKPOINT_SHARES = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: Pod slots per node (the replay's node `pods` capacity).
PODS_PER_NODE = 1001


@dataclass(frozen=True)
class Group:
    gpus: int
    milli: int
    spec: str
    #: CPU-only pods group by their own (cpu, memory); GPU pods leave these 0.
    cpu: int = 0
    mem: int = 0


def pod_type(p: list[Any]) -> PodType:
    gpu = int(p[2]) > 0 and int(p[3]) > 0
    return PodType(int(p[0]), int(p[1]), int(p[2]) if gpu else 0, int(p[3]) if gpu else 0, str(p[4]) if gpu else "")


def fits_empty(t: PodType, c: NodeClass) -> bool:
    if t.gpus == 0:
        return t.cpu <= c.cpu and t.mem <= c.mem
    return allowed(t, c)


def checkpoints(pods: list[list[Any]], capacity_milli: int) -> list[int]:
    """Prefix lengths where the arrived GPU milli first reaches each share of capacity, or the
    arrived pods each share of the list, then the whole list."""
    cuts = {math.ceil(share * len(pods)) for share in CHECKPOINT_SHARES}
    return capacity_cuts(pods, capacity_milli, CHECKPOINT_SHARES, cuts)


def capacity_cuts(pods: list[list[Any]], capacity_milli: int, shares: tuple[float, ...], cuts: set[int]) -> list[int]:
    """``cuts`` plus the prefix lengths where the arrived GPU milli first reaches each share of
    capacity, inside the list, then the whole list."""
    acc, left = 0, list(shares)
    for i, p in enumerate(pods):
        acc += int(p[2]) * int(p[3]) if int(p[2]) > 0 and int(p[3]) > 0 else 0
        while left and acc >= left[0] * capacity_milli:
            left.pop(0)
            cuts.add(i + 1)
    return sorted(c for c in cuts if 0 < c < len(pods)) + [len(pods)]


class Rows(Protocol):
    """What the row builders shared with ``level_bound`` need of a model."""

    def var(self, lo: float, hi: float, cost: float = 0.0, integer: bool = False) -> int: ...

    def row(self, entries: list[tuple[int, float]], lo: float, hi: float) -> None: ...

    def at_most(self, entries: list[tuple[int, float]], hi: float) -> None: ...

    def at_least(self, entries: list[tuple[int, float]], lo: float) -> None: ...


class _Model:
    """The HiGHS model: variables, rows and the bookkeeping between them."""

    def __init__(self, time_limit: float) -> None:
        import highspy

        self.hs = highspy
        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        self.h.setOptionValue("time_limit", float(time_limit))
        self.h.setOptionValue("mip_rel_gap", 1e-4)
        self.h.setOptionValue("threads", 1)
        self.n = 0

    def var(self, lo: float, hi: float, cost: float = 0.0, integer: bool = False) -> int:
        self.h.addVar(float(lo), float(hi))
        k = self.n
        self.n += 1
        if cost:
            self.h.changeColCost(k, float(cost))
        if integer:
            self.h.changeColIntegrality(k, self.hs.HighsVarType.kInteger)
        return k

    def row(self, entries: list[tuple[int, float]], lo: float, hi: float) -> None:
        import numpy as np

        entries = [(k, v) for k, v in entries if v != 0.0]
        if not entries:
            return
        idx = np.array([k for k, _ in entries], dtype=np.int32)
        val = np.array([float(v) for _, v in entries])
        self.h.addRow(float(lo), float(hi), len(entries), idx, val)

    def at_most(self, entries: list[tuple[int, float]], hi: float) -> None:
        self.row(entries, -self.hs.kHighsInf, hi)

    def at_least(self, entries: list[tuple[int, float]], lo: float) -> None:
        self.row(entries, lo, self.hs.kHighsInf)


def max_gpu_milli_online(pods: list[list[Any]], nodes: list[list[Any]], time_limit: float = 60.0) -> PackingBound:
    """An upper bound on the GPU milli placed after the last of ``pods`` by any run of the
    protocol (each pod placed on arrival when some node has room for it)."""
    classes = Counter(NodeClass(int(n[1]), int(n[2]), int(n[3]), str(n[4])) for n in nodes if int(n[3]) > 0)
    clist = list(classes)
    stream = [pod_type(p) for p in pods]
    cuts = checkpoints(pods, sum(c.gpus * n for c, n in classes.items()) * MILLI)
    arrived = [Counter(stream[:j]) for j in cuts]
    tlist = list(arrived[-1])
    pairs = [(t, c) for t in tlist for c in clist if fits_empty(t, c)]
    m = _Model(time_limit)
    last = len(cuts) - 1
    x: dict[tuple[PodType, NodeClass, int], int] = {}
    for j in range(len(cuts)):
        for t, c in pairs:
            cost = t.milli * t.gpus if j == last else 0.0
            x[t, c, j] = m.var(0, arrived[j][t], cost, integer=j == last)
    m.h.changeObjectiveSense(m.hs.ObjSense.kMaximize)
    stream_rows(m, x, pairs, tlist, arrived)
    capacity_rows(m, x, pairs, classes, last)
    _maximality_rows(m, x, pairs, classes, tlist, arrived)
    start = time.monotonic()
    m.h.run()
    info = m.h.getInfo()
    status = m.h.getModelStatus()
    bound = info.mip_dual_bound
    if not math.isfinite(bound):
        raise RuntimeError(f"HiGHS gave no bound ({m.h.modelStatusToString(status)})")
    return solved(bound, info.objective_function_value, start, m.n, m.h.modelStatusToString(status))


def solved(bound: float, incumbent: float, start: float, variables: int, status: str) -> PackingBound:
    """What a solve reports: its bound, best solution, time since ``start`` and size."""
    return {
        "bound": float(bound),
        "incumbent": float(incumbent),
        "solve_s": time.monotonic() - start,
        "variables": variables,
        "status": status,
    }


def stream_rows(m: Rows, x, pairs, tlist, arrived) -> None:
    """Pods stay where they are placed; what is placed between checkpoints arrived between them."""
    by_type = defaultdict(list)
    for t, c in pairs:
        by_type[t].append(c)
    for j in range(1, len(arrived)):
        for t, c in pairs:
            m.at_least([(x[t, c, j], 1.0), (x[t, c, j - 1], -1.0)], 0.0)
        for t in tlist:
            cs = by_type[t]
            m.at_most([(x[t, c, j], 1.0) for c in cs], arrived[j][t])
            grew = [(x[t, c, j], 1.0) for c in cs] + [(x[t, c, j - 1], -1.0) for c in cs]
            m.at_most(grew, arrived[j][t] - arrived[j - 1][t])
    for t in tlist:
        m.at_most([(x[t, c, 0], 1.0) for c in by_type[t]], arrived[0][t])


def capacity_rows(m: Rows, x, pairs, classes, j: int) -> None:
    """``bound``'s relaxation of one packing, at checkpoint j."""
    by_class = defaultdict(list)
    for t, c in pairs:
        by_class[c].append(t)
    for c, ts in by_class.items():
        count = classes[c]
        ks = [x[t, c, j] for t in ts]
        m.at_most([(k, t.cpu) for k, t in zip(ks, ts)], count * c.cpu)
        m.at_most([(k, t.mem) for k, t in zip(ks, ts)], count * c.mem)
        m.at_most([(k, 1.0) for k in ks], count * PODS_PER_NODE)
        gts = [(k, t) for k, t in zip(ks, ts) if t.gpus > 0]
        for f in _dffs([t.milli / MILLI for _, t in gts]):
            m.at_most([(k, t.gpus * f(t.milli / MILLI)) for k, t in gts], count * c.gpus)
        share = [(k, t.gpus * t.milli / MILLI / c.gpus) for k, t in gts]
        for f in _dffs([s for _, s in share])[1:]:
            m.at_most([(k, f(s)) for k, s in share], count)
        for dim in ([t.cpu / c.cpu for t in ts], [t.mem / c.mem for t in ts]):
            for f in (lambda v: dff_round(v, 1), lambda v: dff_round(v, 2)):
                m.at_most([(k, f(s)) for k, s in zip(ks, dim)], count)


def _groups(tlist: list[PodType]) -> dict[Group, list[PodType]]:
    out: dict[Group, list[PodType]] = defaultdict(list)
    for t in tlist:
        key = Group(t.gpus, t.milli, t.spec) if t.gpus > 0 else Group(0, 0, "", t.cpu, t.mem)
        out[key].append(t)
    return out


def usage_vars(m: Rows, x, pairs, clist, j: int) -> dict[NodeClass, dict[str, int]]:
    """Per class at checkpoint j: CPU, memory, pods, GPU slices and GPU milli in use."""
    out: dict[NodeClass, dict[str, int]] = {}
    for c in clist:
        on_c = [(x[t, c2, j], t) for t, c2 in pairs if c2 == c]
        use = {
            "cpu": [(k, float(t.cpu)) for k, t in on_c],
            "mem": [(k, float(t.mem)) for k, t in on_c],
            "pods": [(k, 1.0) for k, _ in on_c],
            "slices": [(k, float(t.gpus)) for k, t in on_c],
            "milli": [(k, float(t.gpus * t.milli)) for k, t in on_c],
        }
        out[c] = {}
        for name, entries in use.items():
            v = m.var(0, math.inf)
            m.row([*entries, (v, -1.0)], 0.0, 0.0)
            out[c][name] = v
    return out


def _maximality_rows(m: _Model, x, pairs, classes, tlist, arrived) -> None:
    """A rejected pod means no room for its group anywhere it is allowed, at every later checkpoint."""
    by_type = defaultdict(list)
    for t, c in pairs:
        by_type[t].append(c)
    groups = _groups(tlist)
    for j in range(len(arrived)):
        usage = usage_vars(m, x, pairs, list(classes), j)
        for g, ts in groups.items():
            n = {t: arrived[j][t] for t in ts if arrived[j][t] > 0}
            if not n:
                continue
            worst = PodType(max(t.cpu for t in ts), max(t.mem for t in ts), g.milli, g.gpus, g.spec)
            z = m.var(0, 1, integer=True)
            for t, count in n.items():
                # z = 0: every pod of t arrived by j is placed by j.
                m.at_least([(x[t, c, j], 1.0) for c in by_type[t]] + [(z, float(count))], count)
            for c, count in classes.items():
                if fits_empty(worst, c):
                    no_room_rows(m, usage[c], c, count, worst, z)


def no_room_rows(m: Rows, use: dict[str, int], c: NodeClass, count: int, g: PodType, z: int) -> None:
    """z = 1 ⇒ every node of class c is starved for g (CPU, memory or pod slots) or has no GPUs
    with room for it."""
    s_cpu, s_mem, s_pods = (m.var(0, count) for _ in range(3))
    m.at_most([(s_cpu, c.cpu - g.cpu + 1), (use["cpu"], -1.0)], 0.0)
    m.at_most([(s_mem, c.mem - g.mem + 1), (use["mem"], -1.0)], 0.0)
    m.at_most([(s_pods, PODS_PER_NODE), (use["pods"], -1.0)], 0.0)
    starved = (s_cpu, s_mem, s_pods)
    if g.gpus == 0:
        m.at_least([(s, 1.0) for s in starved] + [(z, -float(count))], 0.0)
        return
    # GPUs in use on each node that is not starved: all of them for a one-GPU group, all but
    # gpus-1 for a multi-GPU one.
    busy = c.gpus - g.gpus + 1
    m.at_least([(use["slices"], 1.0), (z, -busy * count)] + [(s, busy) for s in starved], 0.0)
    if g.gpus == 1:
        least = (MILLI + 1 - g.milli) * c.gpus
        m.at_least([(use["milli"], 1.0), (z, -least * count)] + [(s, least) for s in starved], 0.0)

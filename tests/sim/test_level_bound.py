"""The level bound (hami_fast.sim.level_bound): valid against the protocol's exact best on tiny
clusters, below every policy on small ones, and tighter than the pooled bounds where hindsight
between checkpoints helps them."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hami_fast import _native
from hami_fast.sim import bound, level_bound, online_bound
from hami_fast.sim.runner import POLICIES, Run, replay
from openb_trace import write_cluster, write_spec_variant


def _choices(state, pod, nodes):
    """Every placement of ``pod`` the protocol allows: (node, GPUs) with room, or none."""
    cpu, mem, milli, num, spec = pod
    out = []
    for i, (free_cpu, free_mem, gpus) in enumerate(state):
        model = nodes[i][4]
        if cpu > free_cpu or mem > free_mem or (num and spec and model not in spec.split("|")):
            continue
        if not num:
            out.append((i, ()))
            continue
        roomy = [g for g, free in enumerate(gpus) if free >= milli]
        out += [(i, combo) for combo in itertools.combinations(roomy, num)]
    return out


def _place(state, pod, choice):
    i, combo = choice
    free_cpu, free_mem, gpus = state[i]
    gpus = tuple(free - pod[2] if g in combo else free for g, free in enumerate(gpus))
    return state[:i] + ((free_cpu - pod[0], free_mem - pod[1], gpus),) + state[i + 1 :]


def protocol_best(pods, nodes) -> int:
    """The most GPU milli any run of the protocol places: every choice of node and GPUs for each
    pod that fits when it arrives (a pod that fits is placed; one that does not is rejected)."""
    start = tuple((n[1], n[2], (1000,) * n[3]) for n in nodes)
    seen: dict = {}

    def best(state, k: int) -> int:
        """The most GPU milli pods k.. add to ``state`` (nodes of one model and equal free
        resources are interchangeable, and so are a node's GPUs)."""
        if k == len(pods):
            return 0
        key = (k, tuple(sorted((n[4], (c, m, tuple(sorted(g)))) for n, (c, m, g) in zip(nodes, state))))
        if key not in seen:
            choices = _choices(state, pods[k], nodes)
            gain = pods[k][2] * pods[k][3]
            seen[key] = (
                max(gain + best(_place(state, pods[k], c), k + 1) for c in set(choices))
                if choices
                else best(state, k + 1)
            )
        return seen[key]

    return best(start, 0)


def _tiny_case(seed: int):
    rng = random.Random(seed)
    nodes = [
        [f"n{i}", rng.choice([4000, 8000, 16000]), 65536, rng.choice([1, 2, 2, 4]), rng.choice(["G2", "T4"])]
        for i in range(rng.choice([1, 2, 2, 3]))
    ]
    pods = []
    for _ in range(rng.randint(4, 7)):
        kind = rng.random()
        num, milli = (0, 0) if kind < 0.1 else (2, 1000) if kind < 0.2 else (1, rng.choice([230, 470, 600, 810, 1000]))
        spec = rng.choice(["", "", "T4"]) if num else ""
        pods.append([rng.choice([1000, 2000, 4000]), 1024, milli, num, spec])
    return pods, nodes


@pytest.mark.parametrize("seed", range(40))
def test_level_bound_is_at_least_the_protocols_best(seed):
    pods, nodes = _tiny_case(seed)
    exact = protocol_best(pods, nodes)
    found = level_bound.max_gpu_milli_levels(pods, nodes)["bound"]
    assert found >= exact - 1e-6, (pods, nodes, found, exact)


def test_an_early_slice_keeps_its_gpu():
    # Two GPUs, two 810 slices then two whole-GPU pods: every run places the slices first.
    nodes = [["n", 64000, 65536, 2, "G2"]]
    pods = [[1000, 1024, 810, 1, ""]] * 2 + [[1000, 1024, 1000, 1, ""]] * 2
    assert protocol_best(pods, nodes) == 1620
    assert level_bound.max_gpu_milli_levels(pods, nodes)["bound"] == pytest.approx(1620)
    assert bound.max_gpu_milli(pods, nodes)["bound"] == pytest.approx(2000)


def test_levels_beat_the_pooled_bounds_when_slices_and_whole_gpus_mix():
    """Two 2-GPU nodes and 11 pods of 470, 810 and 1000 milli. The pooled bounds keep counts per
    checkpoint and re-pack them in hindsight; per-GPU levels keep each slice where it landed."""
    nodes = [["n0", 96000, 393216, 2, "G2"], ["n1", 96000, 393216, 2, "G2"]]
    sizes = [470, 470, 810, 470, 470, 810, 810, 810, 1000, 470, 810]
    pods = [[1000, 1024, m, 1, ""] for m in sizes]
    exact = protocol_best(pods, nodes)
    levels = level_bound.max_gpu_milli_levels(pods, nodes)["bound"]
    pooled = min(bound.max_gpu_milli(pods, nodes)["bound"], online_bound.max_gpu_milli_online(pods, nodes)["bound"])
    assert exact <= levels + 1e-6
    assert levels < pooled - 100, (exact, levels, pooled)


@pytest.mark.parametrize("cluster_seed", [2, 6])
def test_level_bound_is_below_every_policy(tmp_path, cluster_seed):
    nodes, pods = write_cluster(tmp_path, nodes=24, pods=90, seed=cluster_seed)
    spec = write_spec_variant(tmp_path, nodes, pods, cluster_seed)
    for trace in (pods, spec):
        arrivals = json.loads(_native.replay_arrivals(nodes.read_bytes(), trace.read_bytes(), seed=1))
        offline = bound.seed_bound(arrivals)["unallocated_pct_bound"]
        levels = bound.seed_bound(arrivals, levels=True)["unallocated_pct_bound"]
        results = {p: replay(Run(str(nodes), str(trace), p, 1))["unallocated_pct_at_100"] for p in POLICIES}
        assert offline <= levels <= min(results.values()), (offline, levels, results)


def test_cli_reports_the_level_bound(tmp_path, capsys):
    nodes, pods = write_cluster(tmp_path, nodes=24, pods=90, seed=3)
    out = tmp_path / "b.json"
    rc = bound.main(["--nodes", str(nodes), "--pods", str(pods), "--seeds", "1", "--levels", "--out", str(out)])
    assert rc == 0
    row = json.loads(out.read_text())[0]
    plain = bound.trace_bound(nodes, pods, [1])
    assert row["mean"] >= plain["mean"]
    capsys.readouterr()

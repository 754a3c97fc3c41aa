"""fgd-balance (rust/hami-core/src/policy/balance.rs) and the offline bound (hami_fast.sim.bound)."""

from __future__ import annotations

import json
import random

import orjson
import pytest
from hami_fast import _native
from hami_fast.sim import bound
from hami_fast.sim.runner import POLICIES, Run, replay
from k8s_objects import v100_node, vgpu_pod
from openb_trace import NODE_HEADER, POD_HEADER, write_cluster


def _trace(tmp_path, nodes: list[str], pods: list[str]):
    n, p = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    n.write_text("\n".join([NODE_HEADER, *nodes]) + "\n")
    p.write_text("\n".join([POD_HEADER, *pods]) + "\n")
    return n.read_bytes(), p.read_bytes()


def _pod(i: int, cpu: int, num: int, milli: int) -> str:
    return f"pod-{i:02d},{cpu},1024,{num},{milli},,LS,Running,0,1,0"


def test_policy_names_come_from_the_engine():
    assert POLICIES == _native.policy_names()
    assert "fgd-balance" in POLICIES and len(set(POLICIES)) == len(POLICIES)


def test_cpu_only_pod_is_kept_off_the_gpu_dense_node(tmp_path):
    """An 8-GPU node with 96 cores and a 2-GPU node with 104 cores; a whole-GPU pod (12 cores),
    a 60-core CPU-only pod, then eight more whole-GPU pods of 12 cores: 9 GPUs asked of 10.
    FGD sees no fragment change for the CPU-only pod on either node and breaks the tie by the
    seed's node order: where it picks the 8-GPU node, only 36 cores are left for its 8 GPUs and
    GPU pods fail. fgd-balance puts it where CPU is spare beyond the free GPUs' need (12 cores per
    GPU, learned from the first pod): every pod fits, whatever the node order."""
    nodes = ["node-g2,96000,393216,8,G2", "node-t4,104000,524288,2,T4"]
    pods = [_pod(0, 12000, 1, 1000), _pod(1, 60000, 0, 0)] + [_pod(i, 12000, 1, 1000) for i in range(2, 10)]
    n, p = _trace(tmp_path, nodes, pods)
    run = lambda policy, seed: json.loads(_native.replay(n, p, policy, seed=seed, tune=0, shuffle=False))  # noqa: E731
    fgd_failed = [run("fgd", s)["failed"] for s in range(1, 21)]
    balance_failed = [run("fgd-balance", s)["failed"] for s in range(1, 21)]
    assert balance_failed == [0] * 20
    assert max(fgd_failed) >= 4 and min(fgd_failed) == 0, fgd_failed


def test_balance_replays_deterministically_and_differs_from_fgd(tmp_path):
    nodes, pods = write_cluster(tmp_path, nodes=90, pods=400, seed=5)
    a = replay(Run(str(nodes), str(pods), "fgd-balance", 3))
    b = replay(Run(str(nodes), str(pods), "fgd-balance", 3))
    fgd = replay(Run(str(nodes), str(pods), "fgd", 3))
    assert a["alloc_pct_by_arrived"] == b["alloc_pct_by_arrived"]
    assert a["frag_pct_by_arrived"] == b["frag_pct_by_arrived"]
    assert a["alloc_pct_by_arrived"] != fgd["alloc_pct_by_arrived"], "a different policy places differently"


def test_live_scheduler_accepts_fgd_balance():
    c = _native.Cluster()
    for n in ("node-a", "node-b"):
        c.apply(orjson.dumps(v100_node(n)))
    held = {"hami.io/vgpu-node": "node-a", "hami.io/vgpu-devices-allocated": "GPU-a0,NVIDIA,16384,0:;"}
    c.apply(orjson.dumps(vgpu_pod("old", 1, held)))
    half = orjson.dumps(vgpu_pod("new", 16384, {"hami.io/node-scheduler-policy": "fgd-balance"}))
    out = json.loads(c.explain(half, 7, node_policy="spread"))
    assert out["node"] == "node-a", "the annotation selects fgd-balance over the flag"
    assert out["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-a0,NVIDIA,16384,0:;", "closes the half GPU"
    # The learned workload is the one placed half-GPU type: no choice leaves a fragment for it
    # (Δ = 0 everywhere); the tightest GPU and then the smaller name break the ties.
    assert out["scores"]["node-a"] >= out["scores"]["node-b"] > 0


# --- the bound ---------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_dual_feasible_functions_never_overfill_a_bin(seed):
    rng = random.Random(seed)
    sizes = [rng.choice([0.05, 0.19, 0.23, 0.32, 0.47, 0.5, 0.65, 0.81, 1.0]) for _ in range(40)]
    funcs = bound._dffs(sizes)
    for _ in range(300):
        items, room = [], 1.0
        for s in rng.sample(sizes, len(sizes)):
            if s <= room + 1e-12:
                items.append(s)
                room -= s
        for f in funcs:
            assert sum(f(x) for x in items) <= 1 + 1e-9, (items, f)


def test_bound_sees_that_two_large_slices_never_share_a_gpu():
    nodes = [["n", 64000, 65536, 1, "G2"]]
    pods = [[1000, 1024, 600, 1, ""], [1000, 1024, 600, 1, ""]]
    assert bound.max_gpu_milli(pods, nodes)["bound"] == pytest.approx(600)
    # Multi-GPU pods need one node: two 2-GPU pods on two 3-GPU nodes, not three on 6 GPUs.
    nodes = [["a", 64000, 65536, 3, "G2"], ["b", 64000, 65536, 3, "G2"]]
    pods = [[1000, 1024, 1000, 2, ""]] * 3
    assert bound.max_gpu_milli(pods, nodes)["bound"] == pytest.approx(4000)
    # CPU binds: 2 GPUs but CPU for one pod.
    pods = [[40000, 1024, 1000, 1, ""]] * 2
    assert bound.max_gpu_milli(pods, [["n", 64000, 65536, 2, "G2"]])["bound"] == pytest.approx(1000)


def test_bound_is_below_every_policy(tmp_path):
    nodes, pods = write_cluster(tmp_path, nodes=60, pods=160, seed=2)
    for seed in (1, 2):
        arrivals = json.loads(_native.replay_arrivals(nodes.read_bytes(), pods.read_bytes(), seed=seed))
        b = bound.seed_bound(arrivals)["unallocated_pct_bound"]
        results = {p: replay(Run(str(nodes), str(pods), p, seed))["unallocated_pct_at_100"] for p in POLICIES}
        assert all(b <= v for v in results.values()), (b, results)
        assert b < min(results.values()) + 5, "the bound is not vacuous"


def test_sweep_table_carries_the_bound_column(tmp_path, capsys):
    from hami_fast.cli import main

    nodes, pods = write_cluster(tmp_path, pods=80)
    arrivals = [json.loads(_native.replay_arrivals(nodes.read_bytes(), pods.read_bytes(), seed=s)) for s in (1, 2)]
    mean = sum(bound.seed_bound(a)["unallocated_pct_bound"] for a in arrivals) / 2
    bounds = tmp_path / "bound.json"
    bounds.write_text(json.dumps([{"trace": "pods", "mean": mean}]))
    table = tmp_path / "t.md"
    rc = main(
        ["simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "fgd,fgd-balance", "--seeds", "1-2",
         "--jobs", "1", "--no-progress", "--bound", str(bounds), "--table", str(table)]
    )  # fmt: skip
    assert rc == 0
    caption, blank, head, _, row = table.read_text().splitlines()[:5]
    assert caption.startswith("Unallocated GPU % at 100 % of capacity arrived") and caption.endswith(
        "bound: the offline lower bound of the trace."
    )
    assert head == "| trace | bound | fgd | fgd-balance |"
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "pods" and float(cells[1]) == pytest.approx(mean, abs=0.006)
    assert float(cells[1]) <= min(float(cells[2]), float(cells[3]))
    capsys.readouterr()

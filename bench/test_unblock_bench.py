"""Unblocking pending pods: openb `default` replayed with `spread` to 100 % arrived;
the GPU pods that failed are the pending queue (Pending pods in the snapshot). Budget: 5 % of the
GPU pods. The queue planner (`plan --objective pending`, what `descheduler --auto` applies: each
pod in order with the fewest moves, at most 8 each) against the greedy baseline (its
fragment-lowering moves within the same budget, then every pending pod placed where it fits).
Goal: >= 1.2x the baseline's pending pods unblocked per move.

With ``HAMI_FAST_BENCH_BUILDS`` (see ``bench/builds.py``) the table is printed for each build.

Timings: a whole plan on the 1,213-node cluster (JSON in, JSON out) <= 1 s; `--for` one pod
<= 100 ms. Run with ``python -m pytest bench/test_unblock_bench.py --benchmark-enable -s``.
Skips when the openb traces are absent (``$HAMI_FAST_SHARED/data/openb`` or ``../shared``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest
from builds import BUILDS
from hami_fast import _native

SHARED = Path(os.environ.get("HAMI_FAST_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
OPENB = SHARED / "data" / "openb"
pytestmark = pytest.mark.skipif(
    not (OPENB / "openb_node_list_gpu_node.csv").is_file(),
    reason=f"openb traces not found at {OPENB} (set HAMI_FAST_SHARED or put shared/ beside the repository)",
)
SEEDS = [42, 43, 44, 45, 46]


def snapshot(seed: int, native=_native) -> bytes:
    nodes = (OPENB / "openb_node_list_gpu_node.csv").read_bytes()
    pods = (OPENB / "openb_pod_list_default.csv").read_bytes()
    return native.replay_snapshot(nodes, pods, "spread", 100.0, seed)


@pytest.fixture(scope="module")
def full() -> bytes:
    return snapshot(42)


def pending_pods(snap: bytes) -> list[dict]:
    return [p for p in orjson.loads(snap)["items"] if p.get("status", {}).get("phase") == "Pending"]


@pytest.mark.parametrize("build", list(BUILDS))
def test_unblock_pending_queue_vs_greedy(build):
    native = BUILDS[build]
    rows = []
    for seed in SEEDS:
        snap = snapshot(seed, native)
        started = time.perf_counter()
        r = orjson.loads(native.plan([snap], b'{"objective": "pending", "max_moves_pct": 5.0, "baseline": true}'))
        wall = (time.perf_counter() - started) * 1000
        b = r["baseline"]
        assert len(r["moves"]) <= r["max_moves"] and b["moves"] <= r["max_moves"]
        assert r["fit_without_moves"] <= 0.01 * r["pending"], "the replay already tried each of them"
        per_move = r["unblocked_by_moves"] / max(len(r["moves"]), 1)
        base_per_move = b["unblocked"] / max(b["moves"], 1)
        rows.append((seed, r, b, per_move, base_per_move, wall))
    print(f"\nbuild {build}")
    print(
        "seed  pending  budget | queue: unblocked  moves  per move  freed GPUs | greedy: unblocked  moves  per move  freed GPUs | ratio  ms"
    )
    for seed, r, b, pm, bpm, wall in rows:
        ratio = pm / bpm if bpm else float("inf")
        print(
            f"{seed:>4}  {r['pending']:>7}  {r['max_moves']:>6} | {r['unblocked_by_moves']:>16}  {len(r['moves']):>5}  {pm:>8.3f}  {r['freed_whole_gpus']:>10} |"
            f" {b['unblocked']:>17}  {b['moves']:>5}  {bpm:>8.3f}  {b['freed_whole_gpus']:>10} | {ratio:>5.1f}  {wall:.0f}"
        )

    def mean(field) -> float:
        return sum(field(row) for row in rows) / len(rows)

    q_unblocked, q_moves = mean(lambda x: x[1]["unblocked_by_moves"]), mean(lambda x: len(x[1]["moves"]))
    g_unblocked, g_moves = mean(lambda x: x[2]["unblocked"]), mean(lambda x: x[2]["moves"])
    total, base = q_unblocked / max(q_moves, 1e-9), g_unblocked / max(g_moves, 1e-9)
    print(
        f"mean  {mean(lambda x: x[1]['pending']):>7.1f}  {mean(lambda x: x[1]['max_moves']):>6.1f} |"
        f" {q_unblocked:>16.1f}  {q_moves:>5.1f}  {total:>8.3f}  {mean(lambda x: x[1]['freed_whole_gpus']):>10.1f} |"
        f" {g_unblocked:>17.1f}  {g_moves:>5.1f}  {base:>8.3f}  {mean(lambda x: x[2]['freed_whole_gpus']):>10.1f} |"
        f" {total / base if base else float('inf'):>5.1f}  {mean(lambda x: x[5]):.0f}"
    )
    print(f"all seeds: queue {total:.3f} pods per move, greedy {base:.3f} pods per move (goal: >= 1.2x)")
    assert all(r["unblocked_by_moves"] > 0 for _, r, *_ in rows)
    assert total >= 1.2 * base


@pytest.mark.parametrize("build", list(BUILDS))
def test_plan_speed_full_cluster(benchmark, full, build):
    benchmark.group = "plan openb default/spread/100% (1,213 nodes), end to end"
    native = BUILDS[build]
    out = benchmark.pedantic(lambda: native.plan([full], b'{"baseline": false}'), rounds=5, iterations=1)
    assert orjson.loads(out)["nodes"] == 1213


@pytest.mark.parametrize("build", list(BUILDS))
def test_for_one_pod_speed(benchmark, full, build):
    benchmark.group = "plan --for one pending pod (1,213 nodes), end to end"
    native = BUILDS[build]
    pods = pending_pods(full)
    # A one-GPU pod (the common case) that moves can unblock.
    small = next(p for p in pods if p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1")
    options = orjson.dumps({"for_pod": small, "max_moves": 8})
    out = benchmark.pedantic(lambda: native.plan([full], options), rounds=30, iterations=1)
    result = orjson.loads(out)
    print(f"\n--for {result['pod']}: {result['message']} (planning {result['elapsed_ms']:.1f} ms)")

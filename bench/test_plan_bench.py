"""Planner quality and speed on clusters built by replaying openb `default` with `spread` to 90 %
of GPU capacity arrived (1,213 nodes, 6,212 GPUs).

Run with ``python -m pytest bench/test_plan_bench.py --benchmark-enable -s``. Target: one plan
(snapshot JSON in, plan JSON out, 5 % of pods movable) in ≤ 1 s, per build of
``HAMI_FAST_BENCH_BUILDS`` (see ``bench/builds.py``) side by side. The quality test prints the
table of docs/descheduler.md: whole GPUs freed and fragmentation before / after, drain planner
vs the greedy baseline, at most 5 % of pods moved. Skips when ../shared is absent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest
from builds import BUILDS
from hami_fast import _native

SHARED = Path(os.environ.get("HAMI_FAST_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
OPENB = SHARED / "data" / "openb"
pytestmark = pytest.mark.skipif(
    not (OPENB / "openb_node_list_gpu_node.csv").is_file(),
    reason=f"openb traces not found at {OPENB} (the shared data folder sits beside the repository)",
)
SEEDS = [42, 1, 2, 3, 4]


def snapshot(seed: int) -> bytes:
    nodes = (OPENB / "openb_node_list_gpu_node.csv").read_bytes()
    pods = (OPENB / "openb_pod_list_default.csv").read_bytes()
    return _native.replay_snapshot(nodes, pods, "spread", 90.0, seed)


@pytest.fixture(scope="module")
def spread90() -> bytes:
    return snapshot(42)


@pytest.mark.parametrize("build", list(BUILDS))
def test_plan_speed_openb(benchmark, spread90, build):
    benchmark.group = "plan openb default/spread/90% (1,213 nodes)"
    options = b'{"max_moves_pct": 5.0, "baseline": false}'
    native = BUILDS[build]
    out = benchmark.pedantic(lambda: native.plan([spread90], options), rounds=5, iterations=1, warmup_rounds=1)
    result = orjson.loads(out)
    assert result["nodes"] == 1213
    assert result["elapsed_ms"] < 1000
    assert result["after"]["free_whole_gpus"] > result["before"]["free_whole_gpus"]


def test_plan_quality_openb():
    rows = []
    for seed in SEEDS:
        result = orjson.loads(_native.plan([snapshot(seed)], b'{"max_moves_pct": 5.0, "baseline": true}'))
        b, a, g = result["before"], result["after"], result["baseline"]["after"]
        assert len(result["moves"]) <= 0.05 * result["pods"] and result["baseline"]["moves"] <= 0.05 * result["pods"]
        assert a["free_whole_gpus"] >= g["free_whole_gpus"]
        rows.append(
            (
                seed,
                result["pods"],
                len(result["moves"]),
                result["baseline"]["moves"],
                b,
                a,
                g,
                result["elapsed_ms"],
                result["baseline"]["elapsed_ms"],
            )
        )
    print()
    print(
        "seed  pods  moves(drain/greedy)  free GPUs before -> drain | greedy   frag GPUs before -> drain | greedy   frag % idle before -> drain | greedy   ms drain | greedy"
    )
    for seed, pods, md, mg, b, a, g, td, tg in rows:
        print(
            f"{seed:>4}  {pods:>4}  {md:>6} / {mg:<6}       {b['free_whole_gpus']:>5} -> {a['free_whole_gpus']:>5} | {g['free_whole_gpus']:<5}      "
            f"{b['fragmentation']:>8.1f} -> {a['fragmentation']:>7.1f} | {g['fragmentation']:<8.1f} "
            f"{b['fragmentation_pct_of_idle']:>6.1f} -> {a['fragmentation_pct_of_idle']:>5.1f} | {g['fragmentation_pct_of_idle']:<6.1f}   {td:>6.1f} | {tg:.1f}"
        )
    print(
        json.dumps(
            [
                {
                    "seed": r[0],
                    "pods": r[1],
                    "moves": r[2],
                    "baseline_moves": r[3],
                    "before": r[4],
                    "drain": r[5],
                    "greedy": r[6],
                }
                for r in rows
            ]
        )
    )

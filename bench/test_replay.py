"""Replay speed: one `default` trace replay (about 10.9k pods after tuning, 1,213 nodes).

Run with ``python -m pytest bench/test_replay.py --benchmark-enable``. Target: FGD ≤ 2 s on one
core (the published simulator needs about 10 minutes per run). Skips when ../shared is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hami_fast import _native

OPENB = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "openb"
pytestmark = pytest.mark.skipif(
    not (OPENB / "openb_node_list_gpu_node.csv").is_file(),
    reason=f"openb traces not found at {OPENB} (the shared data folder sits beside the repository)",
)


@pytest.fixture(scope="module")
def default_trace() -> tuple[bytes, bytes]:
    return (OPENB / "openb_node_list_gpu_node.csv").read_bytes(), (OPENB / "openb_pod_list_default.csv").read_bytes()


@pytest.mark.parametrize("policy", ["fgd", "bestfit", "random", "binpack"])
def test_replay_default(benchmark, default_trace, policy):
    benchmark.group = "replay default (1 run, 1 core)"
    nodes, pods = default_trace
    out = benchmark.pedantic(
        lambda: _native.replay(nodes, pods, policy, seed=42), rounds=3, iterations=1, warmup_rounds=0
    )
    result = json.loads(out)
    assert result["pods"] > 10_000 and result["total_gpus"] == 6212
    if policy == "fgd":
        assert result["unallocated_pct_at_100"] < 5.5

"""Replay speed: one `default` trace replay (about 10.9k pods after tuning, 1,213 nodes).

Run with ``python -m pytest bench/test_replay.py --benchmark-enable``. Target: FGD ≤ 2 s on one
core (the published simulator needs about 10 minutes per run). Skips when ../shared is absent.

Before/after: with ``HAMI_FAST_BENCH_BUILDS`` naming other builds (see ``bench/builds.py``) each
policy is timed on every build in the same run, one build after the other, and
``test_same_decisions_as_other_builds`` checks that every build places every pod of a few traces
and seeds on the same node and GPUs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from builds import BUILDS

SHARED = Path(os.environ.get("HAMI_FAST_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
OPENB = SHARED / "data" / "openb"
pytestmark = pytest.mark.skipif(
    not (OPENB / "openb_node_list_gpu_node.csv").is_file(),
    reason=f"openb traces not found at {OPENB} (set HAMI_FAST_SHARED or put shared/ beside the repository)",
)
# Every node policy the engine knows, in its table order (an older build may lack some: skipped).
POLICIES = BUILDS["this"].policy_names()


def trace(name: str) -> tuple[bytes, bytes]:
    return (OPENB / "openb_node_list_gpu_node.csv").read_bytes(), (OPENB / f"openb_pod_list_{name}.csv").read_bytes()


@pytest.fixture(scope="module")
def default_trace() -> tuple[bytes, bytes]:
    return trace("default")


@pytest.mark.parametrize("build", list(BUILDS))
@pytest.mark.parametrize("policy", POLICIES)
def test_replay_default(benchmark, default_trace, policy, build):
    benchmark.group = f"replay default {policy} (1 run, 1 core)"
    nodes, pods = default_trace
    native = BUILDS[build]
    try:
        native.replay(nodes, pods, policy, seed=42)
    except ValueError as exc:  # an older build without this policy
        assert build != "this" and "policy" in str(exc), exc
        pytest.skip(f"build {build} has no policy {policy}")
    out = benchmark.pedantic(
        lambda: native.replay(nodes, pods, policy, seed=42), rounds=5, iterations=1, warmup_rounds=1
    )
    result = json.loads(out)
    assert result["pods"] > 10_000 and result["total_gpus"] == 6212
    if policy == "fgd":
        assert result["unallocated_pct_at_100"] < 5.5


def placements(snapshot: bytes) -> list[tuple]:
    """Each placed pod's node and allocation, in the snapshot's order (what a decision changes)."""
    items = json.loads(snapshot)["items"]
    return [
        (
            p["metadata"]["name"],
            p["spec"]["nodeName"],
            p["metadata"]["annotations"].get("hami.io/vgpu-devices-allocated"),
        )
        for p in items
        if p["kind"] == "Pod" and p["spec"].get("nodeName")
    ]


@pytest.mark.skipif(len(BUILDS) < 2, reason="HAMI_FAST_BENCH_BUILDS names no other build to compare with")
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("name", "seed"), [("default", 42), ("default", 43), ("multigpu50", 44), ("gpushare40", 45)])
def test_same_decisions_as_other_builds(name, seed, policy):
    nodes, pods = trace(name)
    summaries, placed = {}, {}
    for build, native in BUILDS.items():
        try:
            summary = json.loads(native.replay(nodes, pods, policy, seed=seed))
        except ValueError as exc:  # an older build without this policy
            assert build != "this" and "policy" in str(exc), exc
            continue
        summary.pop("elapsed_s")
        summaries[build] = summary
        # Past the tuned trace's 130 %: every pod's decision is in the snapshot.
        placed[build] = placements(native.replay_snapshot(nodes, pods, policy, 200.0, seed))
    for build in summaries:
        assert summaries[build] == summaries["this"], build
        assert placed[build] == placed["this"], build
    assert len(placed["this"]) > 4_000

"""`hami-fast simulate` and the native trace replay: generated clusters, spec vectors, bad input,
and (when ../shared is present) exact agreement with the published simulator's per-seed curves."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest
from hami_fast import _native
from hami_fast.cli import main
from hami_fast.sim import report
from hami_fast.sim.runner import POLICIES, Run, aggregate, parse_policies, parse_seeds, replay, sweep
from k8s_objects import v100_node, vgpu_pod
from openb_trace import NODE_HEADER, POD_HEADER, write_cluster

SHARED = Path(os.environ.get("HAMI_FAST_SHARED") or Path(__file__).resolve().parents[2].parent / "shared")
OPENB = SHARED / "data" / "openb"
needs_openb = pytest.mark.skipif(
    not (OPENB / "openb_node_list_gpu_node.csv").is_file(),
    reason=f"openb traces not found at {OPENB} (the shared data folder sits beside the repository)",
)


def test_cli_json_has_exactly_the_promised_keys(tmp_path, capsys):
    nodes, pods = write_cluster(tmp_path)
    assert (
        main(
            [
                "simulate",
                "--nodes",
                str(nodes),
                "--pods",
                str(pods),
                "--policy",
                "fgd",
                "--seed",
                "7",
                "--output",
                "json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert list(out) == [
        "policy",
        "seed",
        "pods",
        "failed",
        "total_gpus",
        "unallocated_pct_at_100",
        "alloc_pct_by_arrived",
        "elapsed_s",
    ]
    assert (out["policy"], out["seed"], out["total_gpus"]) == ("fgd", 7, 20 * 11)
    assert out["pods"] > 160, "tuned up to 1.3 × capacity"
    assert 0 < out["failed"] < out["pods"]
    keys = [int(k) for k in out["alloc_pct_by_arrived"]]
    assert keys == sorted(keys) and keys[-1] >= 130
    assert all(0 <= v <= 100 for v in out["alloc_pct_by_arrived"].values())
    assert out["unallocated_pct_at_100"] == pytest.approx(100 - out["alloc_pct_by_arrived"]["100"])
    assert out["elapsed_s"] > 0


def test_text_output_and_plot(tmp_path, capsys):
    nodes, pods = write_cluster(tmp_path)
    png = tmp_path / "run.png"
    assert (
        main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "bestfit", "--plot", str(png)]) == 0
    )
    text = capsys.readouterr().out
    assert "unallocated GPU % at 100 % arrived" in text and "policy bestfit" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_replays_deterministically(tmp_path, policy):
    nodes, pods = write_cluster(tmp_path)
    a = replay(Run(str(nodes), str(pods), policy, seed=3))
    b = replay(Run(str(nodes), str(pods), policy, seed=3))
    a.pop("elapsed_s"), b.pop("elapsed_s")
    assert a == b
    assert a["policy"] == policy and a["trace"] == "pods"
    alloc = a["alloc_pct_by_arrived"]
    # Allocation never exceeds what arrived (arrived % is rounded, and the x±1 window may stand in).
    assert all(v < int(k) + 1.5 for k, v in alloc.items())


def test_engine_fit_agrees_with_the_capacity_index(tmp_path):
    nodes, pods = write_cluster(tmp_path, nodes=12, pods=120, seed=5)
    for policy in ("fgd", "random", "binpack"):
        fast = json.loads(_native.replay(nodes.read_bytes(), pods.read_bytes(), policy, seed=11))
        checked = json.loads(_native.replay(nodes.read_bytes(), pods.read_bytes(), policy, seed=11, check_all=True))
        for d in (fast, checked):
            d.pop("elapsed_s")
        assert fast == checked


def test_fgd_allocates_more_than_random_on_average(tmp_path):
    nodes, pods = write_cluster(tmp_path, nodes=90, pods=400, seed=2)
    final = {}
    for policy in ("fgd", "random"):
        rs = [replay(Run(str(nodes), str(pods), policy, seed=s)) for s in range(42, 47)]
        final[policy] = sum(list(r["alloc_pct_by_arrived"].values())[-1] for r in rs) / len(rs)
    assert final["fgd"] > final["random"]


def test_tune_zero_replays_the_trace_as_is(tmp_path):
    nodes, pods = write_cluster(tmp_path, pods=50)
    r = replay(Run(str(nodes), str(pods), "packing", seed=1, tune=0))
    assert r["pods"] == 50 and r["tuned"] == 0


def test_sweep_runs_in_parallel_and_tabulates(tmp_path, capsys):
    nodes, pods = write_cluster(tmp_path, pods=80)
    pods2 = tmp_path / "openb_pod_list_default.csv"
    pods2.write_text(pods.read_text())
    table = tmp_path / "table.json"
    results = tmp_path / "runs.jsonl"
    rc = main(
        ["simulate", "--nodes", str(nodes), "--pods", str(pods), str(pods2), "--policy", "fgd,random", "--seeds", "42-44",
         "--jobs", "2", "--no-progress", "--table", str(table), "--results", str(results), "--figures", str(tmp_path / "fig"), "--output", "json"]
    )  # fmt: skip
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {(r["trace"], r["policy"]) for r in rows} == {(t, p) for t in ("pods", "default") for p in ("fgd", "random")}
    assert all(r["runs"] == 3 for r in rows)
    default_fgd = next(r for r in rows if r["trace"] == "default" and r["policy"] == "fgd")
    assert default_fgd["published"] == 4.77 and default_fgd["diff"] == pytest.approx(
        default_fgd["mean"] - 4.77, abs=0.011
    )
    assert json.loads(table.read_text()) == rows
    assert len(results.read_text().splitlines()) == 12
    assert sorted(p.name for p in (tmp_path / "fig").iterdir()) == [
        "alloc_default.png", "alloc_pods.png", "frag_default.png", "frag_pods.png"
    ]  # fmt: skip


def test_sweep_results_match_single_runs(tmp_path):
    nodes, pods = write_cluster(tmp_path, pods=60)
    runs = [Run(str(nodes), str(pods), p, s) for p in ("dotprod", "clustering") for s in (1, 2)]
    swept = sweep(runs, jobs=2, progress=False)
    for run, got in zip(runs, swept):
        alone = replay(run)
        assert (got["policy"], got["seed"], got["alloc_pct_by_arrived"]) == (
            run.policy,
            run.seed,
            alone["alloc_pct_by_arrived"],
        )
    agg = aggregate(swept)
    assert set(agg) == {("pods", "dotprod"), ("pods", "clustering")}
    assert "| pods | dotprod |" in report.markdown(report.rows(agg))


def test_seed_and_policy_lists():
    assert parse_seeds("42-45") == [42, 43, 44, 45]
    assert parse_seeds("1,3,7-8") == [1, 3, 7, 8]
    assert parse_policies("all") == POLICIES
    assert parse_policies("FGD, bestfit") == ["fgd", "bestfit"]
    with pytest.raises(ValueError, match="want N"):
        parse_seeds("9-1")
    with pytest.raises(ValueError, match="tetris"):
        parse_policies("tetris")


# FGD's fragmentation measure: the unit vectors of the simulator's frag_test.go (spec §2).
GPU_TYPES = [
    (6000, 465, 1, "", 9.33), (8000, 440, 1, "2080", 9.15), (8000, 475, 1, "T4", 8.76), (8000, 440, 1, "P100", 8.72),
    (2000, 465, 1, "", 8.68), (12000, 900, 1, "", 8.65), (4000, 900, 1, "", 8.43), (16000, 678, 1, "T4", 8.36),
    (8000, 500, 1, "", 8.29), (6000, 511, 1, "", 8.11), (14000, 1000, 2, "2080", 0.54), (4000, 1000, 1, "2080", 0.43),
    (32000, 1000, 2, "T4", 0.43), (16000, 1000, 1, "V100M16", 0.40), (64000, 1000, 2, "", 0.40), (10000, 1000, 2, "", 0.40),
    (11400, 1000, 1, "T4", 0.36), (16000, 1000, 1, "T4", 0.36), (4000, 1000, 2, "", 0.36), (14000, 1000, 2, "V100M16", 0.36),
    (8000, 1000, 4, "", 0.36), (16000, 1000, 2, "", 0.32), (2000, 1000, 1, "T4", 0.32), (6000, 1000, 1, "", 0.32),
    (4000, 1000, 1, "", 0.32), (5000, 1000, 1, "", 0.32), (32000, 1000, 4, "V100M16", 0.32), (32000, 1000, 2, "", 0.32),
    (24000, 1000, 8, "2080", 0.32), (40000, 1000, 4, "", 0.29), (32000, 1000, 8, "", 0.29), (32000, 1000, 1, "T4", 0.29),
    (16000, 1000, 1, "", 0.25), (7000, 1000, 1, "V100M16", 0.25), (24000, 1000, 1, "T4", 0.25),
]  # fmt: skip
WITH_CPU_TYPES = [
    (15700, 1000, 1, 28.69), (11900, 1000, 1, 18.93), (11400, 1000, 1, 12.27), (1000, 0, 0, 7.36), (18710, 1000, 1, 4.85),
    (8200, 1000, 1, 3.79), (16400, 1000, 1, 3.31), (9810, 1000, 1, 1.97), (15200, 1000, 1, 1.87), (11200, 1000, 1, 1.81),
    (14200, 1000, 1, 1.76), (12000, 0, 0, 1.65), (14900, 1000, 1, 1.39), (60200, 1000, 4, 1.23), (64200, 1000, 8, 1.07),
    (32200, 1000, 4, 1.01), (17400, 1000, 2, 0.91), (30200, 1000, 2, 0.69), (16000, 1000, 1, 0.64), (15000, 1000, 1, 0.59),
    (64000, 1000, 8, 0.53), (15000, 0, 0, 0.53), (11910, 1000, 1, 0.53), (120200, 1000, 8, 0.48), (11300, 1000, 1, 0.37),
    (30000, 1000, 2, 0.32), (9800, 1000, 1, 0.32), (8000, 1000, 1, 0.32), (2000, 1000, 1, 0.27), (2000, 80, 1, 0.27),
    (1000, 1000, 1, 0.27),
]  # fmt: skip


@pytest.mark.parametrize(
    ("cpu_left", "free", "model", "types", "expected"),
    [
        (1000, [200, 1000, 1000, 500], "1080", "gpu", 2566.62),
        (1000, [1000] * 4, "1080", "gpu", 3802.40),
        (1000, [1000] * 8, "1080", "gpu", 7604.80),
        (1000, [200, 1000, 1000, 500], "1080", "first", 251.91),
        (64000, [1000] * 8, "P100", "cpu", 887.20),
        (32000, [1000] * 4 + [0] * 4, "P100", "cpu", 554.4),
        (0, [1000] * 4 + [0] * 4, "P100", "cpu", 4000.0),
    ],
)
def test_fragmentation_spec_vectors(cpu_left, free, model, types, expected):
    gpu = [(c, m, n, s, p / 100) for c, m, n, s, p in GPU_TYPES]
    table = {"gpu": gpu, "first": gpu[:1], "cpu": [(c, m, n, "", p / 100) for c, m, n, p in WITH_CPU_TYPES]}[types]
    assert _native.node_frag(cpu_left, free, model, table) == pytest.approx(expected, abs=0.01)


# Bad input is one typed error: kind, object `file:line:column`, field the column, one line on the CLI.
@pytest.mark.parametrize(
    ("which", "text", "kind", "at", "field", "message"),
    [
        ("pods", POD_HEADER + "\nopenb-pod-0000,12000,16384,1,1000,,LS,Running,0,1,0\nopenb-pod-0001,12k,16384,1,460,,LS,Running,0,1,0\n",
         "decode", ":3:2", "column `cpu_milli`", 'expected a non-negative integer, got "12k"'),
        ("pods", POD_HEADER + "\nopenb-pod-0000,12000,16384,-1,1000,,LS,Running,0,1,0\n",
         "invalid", ":2:4", "column `num_gpu`", "-1 is out of range 0..=1024"),
        ("pods", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1\n",
         "decode", ":2:5", "column `gpu_milli`", "missing (row has 4 fields, header has 5)"),
        ("pods", "name,cpu,memory_mib,num_gpu,gpu_milli\np,1,1,1,1\n",
         "decode", ":1", "column `cpu_milli`", "missing from the header (header has: name,cpu,memory_mib,num_gpu,gpu_milli)"),
        ("pods", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", "decode", "", "", "no pod rows after the header"),
        ("pods", "", "decode", "", "", "empty file (want a header line)"),
        ("nodes", NODE_HEADER + "\nn1,64000,262144,two,P100\n",
         "decode", ":2:4", "column `gpu`", 'expected a non-negative integer, got "two"'),
        ("nodes", NODE_HEADER + '\n"n1",64000,262144,2,P100\n',
         "decode", ":2:1", "column `sn`", "quoted fields are not supported in trace CSVs"),
        ("nodes", NODE_HEADER + "\n\xff\n", "decode", ":2", "", "not UTF-8 text"),
    ],
)  # fmt: skip
def test_malformed_csv_is_one_typed_error(tmp_path, capsys, which, text, kind, at, field, message):
    nodes, pods = write_cluster(tmp_path)
    path = nodes if which == "nodes" else pods
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(_native.EngineError) as err:
        replay(Run(str(nodes), str(pods), "fgd"))
    e = err.value
    assert (e.kind, e.object, e.field) == (kind, f"{path}{at}", field)
    line = f"{'decode ' if kind == 'decode' else ''}{path}{at}: {field + ': ' if field else ''}{message}"
    assert str(e) == line
    assert main(["simulate", "--nodes", str(nodes), "--pods", str(pods)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"hami-fast simulate: {line}\n", "one line, no traceback"
    assert captured.out == ""


def test_plan_replay_names_the_broken_csv(tmp_path, capsys):
    nodes, pods = write_cluster(tmp_path)
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,two,1\n")
    assert main(["plan", "--replay", f"{nodes},{pods}"]) == 2
    err = capsys.readouterr().err
    assert err == f'hami-fast plan: decode {pods}:2:4: column `num_gpu`: expected a non-negative integer, got "two"\n'


def test_missing_file_and_unknown_policy(tmp_path, capsys):
    nodes, pods = write_cluster(tmp_path)
    assert main(["simulate", "--nodes", str(tmp_path / "nope.csv"), "--pods", str(pods)]) == 2
    assert "nope.csv: no such file" in capsys.readouterr().err
    assert main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "tetris"]) == 2
    assert "tetris" in capsys.readouterr().err
    with pytest.raises(_native.EngineError, match="unknown policy"):
        _native.replay(nodes.read_bytes(), pods.read_bytes(), "tetris")


# Fidelity: with the same seed, the replay reproduces the published simulator's per-seed curve
# (its `analysis_allo_discrete.csv`) exactly for the deterministic policies.
PUBLISHED_POINTS = [
    ("default", "fgd", 47, {95: 94.78, 96: 95.11, 100: 95.14, 130: 95.27}),
    ("default", "fgd", 50, {100: 95.15, 120: 95.29}),
    ("default", "packing", 43, {92: 91.69, 100: 91.78, 130: 92.06}),
    ("default", "bestfit", 44, {94: 92.84, 100: 92.89, 130: 93.09}),
    ("gpushare60", "bestfit", 42, {90: 89.25, 100: 89.33, 130: 89.72}),
    ("gpushare100", "dotprod", 42, {83: 81.5, 100: 81.74, 130: 82.19}),
]


@needs_openb
@pytest.mark.parametrize(("trace", "policy", "seed", "points"), PUBLISHED_POINTS)
def test_reproduces_published_per_seed_curves(trace, policy, seed, points):
    r = replay(
        Run(str(OPENB / "openb_node_list_gpu_node.csv"), str(OPENB / f"openb_pod_list_{trace}.csv"), policy, seed)
    )
    assert {x: r["alloc_pct_by_arrived"][str(x)] for x in points} == points


@needs_openb
def test_default_trace_shape_matches_the_spec():
    r = replay(Run(str(OPENB / "openb_node_list_gpu_node.csv"), str(OPENB / "openb_pod_list_default.csv"), "fgd", 42))
    assert r["total_gpus"] == 6212
    assert r["typical_types"] == 35, "FGD keeps 35 task types covering 95 % of default's pods"
    assert 10_700 < r["pods"] < 11_000 and 2_600 < r["tuned"] < 2_800


# The same policies in the live scheduler (explain = Filter without side effects).
def test_live_scheduler_accepts_the_simulator_policies():
    c = _native.Cluster()
    for n in ("node-a", "node-b"):
        c.apply(orjson.dumps(v100_node(n)))
    held = {"hami.io/vgpu-node": "node-a", "hami.io/vgpu-devices-allocated": "GPU-a0,NVIDIA,16384,0:;"}
    c.apply(orjson.dumps(vgpu_pod("old", 1, held)))
    half = orjson.dumps(vgpu_pod("new", 16384))
    explain = lambda pod, policy: json.loads(c.explain(pod, 7, node_policy=policy))  # noqa: E731
    fgd = explain(half, "fgd")
    assert fgd["node"] == "node-a"
    assert fgd["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-a0,NVIDIA,16384,0:;", (
        "FGD closes the half-used GPU"
    )
    assert all(0 <= s <= 100 for s in fgd["scores"].values())
    assert explain(half, "spread")["node"] == "node-b"
    assert explain(half, "bestfit")["node"] == "node-a"
    annotated = orjson.dumps(vgpu_pod("new", 16384, {"hami.io/node-scheduler-policy": "fgd"}))
    assert explain(annotated, "spread")["node"] == "node-a", "the pod annotation wins over the flag"

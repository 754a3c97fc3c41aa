"""Workloads with allowed-model lists (hami_fast.sim.gpuspec) and the place-if-fits bound
(hami_fast.sim.online_bound)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from hami_fast import _native
from hami_fast.sim import bound, gpuspec, online_bound
from hami_fast.sim.runner import POLICIES, Run, replay
from openb_trace import write_cluster, write_spec_variant


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.parametrize("share", [5, 10, 20, 33])
def test_a_share_of_the_gpu_pods_gets_a_list_that_admits_a_node(tmp_path, share):
    nodes, pods = write_cluster(tmp_path, nodes=60, pods=400, seed=3)
    text = gpuspec.constrain(pods.read_bytes(), nodes.read_bytes(), share, seed=7)
    before, after = _rows(pods.read_text()), _rows(text)
    gpu = [r for r in after if int(r["num_gpu"]) > 0]
    constrained = [r for r in gpu if r["gpu_spec"]]
    assert len(constrained) <= round(len(gpu) * share / 100)
    assert len(constrained) >= round(len(gpu) * share / 100) - 2  # a pod no listed model can host stays free
    assert all(not r["gpu_spec"] for r in after if int(r["num_gpu"]) == 0)
    shapes = gpuspec.read_node_shapes(nodes.read_bytes())
    for r in constrained:
        assert set(r["gpu_spec"].split("|")) <= {"G2", "T4", "P100"}, "models of the node list only"
        assert gpuspec.spec_fits(r["gpu_spec"], r, shapes), r
    # Every other column is the input's.
    for a, b in zip(before, after):
        assert {k: v for k, v in a.items() if k != "gpu_spec"} == {k: v for k, v in b.items() if k != "gpu_spec"}


def test_lists_follow_the_pod_kind_and_the_seed(tmp_path):
    nodes, pods = write_cluster(tmp_path, nodes=60, pods=600, seed=4)
    a = gpuspec.constrain(pods.read_bytes(), nodes.read_bytes(), 33, seed=1)
    assert a == gpuspec.constrain(pods.read_bytes(), nodes.read_bytes(), 33, seed=1)
    assert a != gpuspec.constrain(pods.read_bytes(), nodes.read_bytes(), 33, seed=2)
    share_specs = {r["gpu_spec"] for r in _rows(a) if r["gpu_spec"] and int(r["gpu_milli"]) < 1000}
    # Sharing pods ask for the small GPUs (T4, P100) or the five-model mix, never G2 alone.
    assert share_specs and "G2" not in share_specs
    multi = [r for r in _rows(a) if r["gpu_spec"] and int(r["num_gpu"]) > 2]
    # A 4- or 8-GPU pod is only sent to a model with nodes that large (G2 here).
    assert all("G2" in r["gpu_spec"].split("|") for r in multi)


def test_a_trace_without_the_column_gets_one_the_replay_reads(tmp_path):
    nodes, pods = write_cluster(tmp_path, nodes=30, pods=200, seed=5)
    lines = [",".join(r.split(",")[:5]) for r in pods.read_text().splitlines()]
    bare = tmp_path / "openb_pod_list_bare.csv"
    bare.write_text("\n".join(lines) + "\n")
    out = gpuspec.build_variants(nodes, [bare], [20], tmp_path / "v")
    assert [p.name for p in out] == ["openb_pod_list_bare-spec20.csv"]
    header = out[0].read_text().splitlines()[0]
    assert header == "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec"
    r = replay(Run(str(nodes), str(out[0]), "fgd", 1))
    assert r["trace"] == "bare-spec20" and r["pods"] > 0


def test_constrained_pods_land_on_their_models_only(tmp_path):
    # One T4 node and one G2 node; every GPU pod may use T4 only: the G2 node stays empty.
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nt,104000,524288,2,T4\ng,96000,393216,8,G2\n")
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
        + "".join(f"p{i},1000,1024,1,1000,T4\n" for i in range(4))
    )
    for policy in POLICIES:
        r = replay(Run(str(nodes), str(pods), policy, 1, tune=0))
        assert r["failed"] == 2, policy


def test_bad_share_is_one_line_and_exit_2(tmp_path, capsys):
    nodes, pods = write_cluster(tmp_path, pods=20)
    rc = gpuspec.main(["--nodes", str(nodes), "--pods", str(pods), "--shares", "5,150", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--shares" in err and "Traceback" not in err


def test_online_bound_keeps_a_slice_that_fit_when_it_arrived():
    nodes = [["n", 64000, 65536, 1, "G2"]]
    early_slice = [[1000, 1024, 600, 1, ""], [1000, 1024, 1000, 1, ""]]
    # Any packing could drop the slice for the whole GPU; the protocol places the slice first.
    assert bound.max_gpu_milli(early_slice, nodes)["bound"] == pytest.approx(1000)
    assert online_bound.max_gpu_milli_online(early_slice, nodes)["bound"] == pytest.approx(600)
    late_slice = early_slice[::-1]
    assert online_bound.max_gpu_milli_online(late_slice, nodes)["bound"] == pytest.approx(1000)


def test_online_bound_lets_a_cpu_starved_node_refuse():
    # The CPU-only pod takes the only node's CPU first: the slice that follows cannot be placed,
    # so the bound must allow rejecting it (0 GPU milli), not force it in.
    nodes = [["n", 4000, 65536, 1, "G2"]]
    pods = [[4000, 1024, 0, 0, ""], [1000, 1024, 600, 1, ""]]
    assert online_bound.max_gpu_milli_online(pods, nodes)["bound"] == pytest.approx(0)


@pytest.mark.parametrize("cluster_seed", [2, 6])
def test_online_bound_is_below_every_policy_and_above_the_offline_one(tmp_path, cluster_seed):
    nodes, pods = write_cluster(tmp_path, nodes=45, pods=160, seed=cluster_seed)
    spec = write_spec_variant(tmp_path, nodes, pods, cluster_seed)
    for trace in (pods, spec):
        for seed in (1, 2):
            arrivals = json.loads(_native.replay_arrivals(nodes.read_bytes(), trace.read_bytes(), seed=seed))
            offline = bound.seed_bound(arrivals)["unallocated_pct_bound"]
            online = bound.seed_bound(arrivals, online=True)["unallocated_pct_bound"]
            results = {p: replay(Run(str(nodes), str(trace), p, seed))["unallocated_pct_at_100"] for p in POLICIES}
            assert offline <= online <= min(results.values()), (offline, online, results)


def test_sweep_prints_each_policys_distance_to_the_bound(tmp_path, capsys):
    from hami_fast.cli import main

    nodes, pods = write_cluster(tmp_path, pods=80)
    bounds = tmp_path / "bound.json"
    bounds.write_text(json.dumps([{"trace": "pods", "mean": 1.25}]))
    rc = main(
        ["simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "fgd,bestfit", "--seeds", "1-2",
         "--jobs", "1", "--no-progress", "--bound", str(bounds), "--output", "json"]
    )  # fmt: skip
    assert rc == 0
    rows = {r["policy"]: r["mean"] for r in json.loads(capsys.readouterr().out)["rows"]}
    from hami_fast.sim import report

    table = report.rows({("pods", p): {"n": 2, "mean": m, "sd": 0, "median": m, "failed": 0, "elapsed_s": 0}
                         for p, m in rows.items()})  # fmt: skip
    head, _, row = report.gap_markdown(table, {"pods": 1.25}).splitlines()
    assert head == "| trace | bound | bestfit | fgd |", "policies in the engine's order"
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:2] == ["pods", "1.25"]
    assert float(cells[2]) == pytest.approx(rows["bestfit"] - 1.25, abs=0.006)
    assert float(cells[3]) == pytest.approx(rows["fgd"] - 1.25, abs=0.006)


def test_variants_sort_after_their_trace():
    from hami_fast.sim.report import _trace_key

    names = ["multigpu20", "default-spec33", "default", "default-spec5", "gpushare20-spec10", "other"]
    assert sorted(names, key=_trace_key) == [
        "default", "default-spec5", "default-spec33", "gpushare20-spec10", "multigpu20", "other"
    ]  # fmt: skip


def test_robustness_table_counts_a_repeated_run_once_and_prints_the_difference(tmp_path):
    from hami_fast.sim import robustness

    def run(trace: str, policy: str, seed: int, value: float) -> str:
        return json.dumps({"trace": trace, "policy": policy, "seed": seed, "unallocated_pct_at_100": value,
                           "failed": 0, "elapsed_s": 0.1})  # fmt: skip

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("\n".join([run("default-spec10", "fgd", 1, 5.0), run("default-spec10", "fgd", 2, 6.0)]) + "\n")
    b.write_text("\n".join([run("default-spec10", "fgd", 2, 6.0), run("default-spec10", "fgd-balance", 1, 4.0)]) + "\n")
    saved = tmp_path / "rows.json"
    saved.write_text(json.dumps([{"trace": "default", "policy": "fgd", "runs": 10, "mean": 4.77}]))
    lines = robustness.markdown(robustness.load([a, b], [saved])).splitlines()
    assert lines[0] == "| trace | fgd | fgd-balance | fgd-balance − fgd (pp) |"
    assert lines[2] == "| default | 4.77 |  |  |"
    assert lines[3] == "| default-spec10 | 5.50 (2) | 4.00 (1) | -1.50 |"

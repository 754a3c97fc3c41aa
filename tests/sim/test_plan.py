"""`hami-fast plan` end to end (CLI entry point, snapshot files as kubectl prints them) and the
planner's promises: documented JSON shape, budget, bare pods untouched, every move valid when it runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest
import yaml
from hami_fast import _native
from hami_fast.cli import main
from k8s_objects import pending_pod, registered_node, replica_pod

DATA = Path(os.environ.get("HAMI_FAST_SHARED") or Path(__file__).resolve().parents[3] / "shared") / "data" / "openb"


def node(name: str, gpus: int = 2) -> dict:
    return registered_node(name, gpus)


def pod(name: str, node_name: str, gpu: int, mem: int, owned: bool = True) -> dict:
    """A running pod of its own ReplicaSet `rs-<name>` holding `mem` MiB and 10 % of GPU `gpu`."""
    return replica_pod(
        name,
        node_name,
        gpu,
        mem,
        cores=10,
        namespace="team",
        labels={"app": name},
        owner=f"rs-{name}" if owned else None,
        owner_uid=f"rs-{name}",
        bind_phase=False,
    )


def fragmented() -> list[dict]:
    # Two nodes, four GPUs, each partly used: 4000+3000 fit on one card, 5000+2000 on another.
    return [
        node("n1"),
        node("n2"),
        pod("a", "n1", 0, 4000),
        pod("b", "n1", 1, 3000),
        pod("c", "n2", 0, 5000),
        pod("d", "n2", 1, 2000),
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "whole",
                "namespace": "team",
                "uid": "u-w",
                "annotations": {
                    "hami.io/vgpu-node": "n3",
                    "hami.io/vgpu-devices-allocated": "GPU-n3-0,NVIDIA,16000,100:;",
                },
            },
            "spec": {
                "nodeName": "n3",
                "containers": [
                    {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"}}}
                ],
            },
            "status": {"phase": "Running"},
        },
        node("n3", 1),
    ]


def run_cli(capsys, *args: str) -> tuple[int, str]:
    code = main(["plan", *args])
    return code, capsys.readouterr().out


def test_plan_json_shape_and_effect(tmp_path, capsys):
    snap = tmp_path / "cluster.json"
    snap.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": fragmented()}))
    code, out = run_cli(capsys, "--snapshot", str(snap), "--max-moves", "4", "--output", "json")
    assert code == 0
    result = json.loads(out)
    assert set(result) >= {"moves", "before", "after", "baseline"}
    assert result["before"]["free_whole_gpus"] == 0
    assert result["after"]["free_whole_gpus"] == 2
    assert result["after"]["fragmentation"] < result["before"]["fragmentation"]
    assert len(result["moves"]) == 2
    for move in result["moves"]:
        assert set(move) == {"pod", "from", "to"}
        assert move["pod"].startswith("team/")
        assert set(move["from"]) == set(move["to"]) == {"node", "gpus"}
    assert result["baseline"]["planner"] == "greedy"


def test_plan_yaml_and_table(tmp_path, capsys):
    snap = tmp_path / "cluster.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": fragmented()}))
    code, out = run_cli(capsys, "--snapshot", str(snap), "--max-moves", "4")
    assert code == 0
    assert "free whole GPUs" in out and "greedy (baseline)" in out and "team/" in out


def test_budget_zero_and_bare_pods(tmp_path, capsys):
    items = [node("n1"), node("n2"), pod("a", "n1", 0, 4000, owned=False), pod("c", "n2", 0, 5000, owned=False)]
    result = orjson.loads(_native.plan([orjson.dumps({"kind": "List", "items": items})], b'{"max_moves": 10}'))
    assert result["moves"] == [] and result["movable_pods"] == 0
    result = orjson.loads(_native.plan([orjson.dumps({"kind": "List", "items": fragmented()})], b'{"max_moves": 0}'))
    assert result["moves"] == [] and result["after"] == result["before"]


def test_moves_are_valid_when_they_run():
    """Apply the plan move by move: each target is checked by the engine's own pre-eviction
    validation against the state the earlier moves left (old copy released)."""
    items = fragmented()
    result = orjson.loads(_native.plan([orjson.dumps({"kind": "List", "items": items})], b'{"max_moves": 4}'))
    by_name = {p["metadata"]["name"]: p for p in items if p["kind"] == "Pod"}
    for move in result["moves"]:
        name = move["pod"].split("/")[1]
        check = orjson.loads(
            _native.validate_target(
                [orjson.dumps({"kind": "List", "items": items})], move["pod"], move["to"]["node"], move["to"]["gpus"]
            )
        )
        assert check["ok"], check
        moved = by_name[name]
        mem = moved["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"]
        moved["metadata"]["annotations"]["hami.io/vgpu-node"] = move["to"]["node"]
        moved["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = (
            f"{move['to']['gpus'][0]},NVIDIA,{mem},10:;"
        )
        moved["spec"]["nodeName"] = move["to"]["node"]
    final = orjson.loads(_native.fragmentation([orjson.dumps({"kind": "List", "items": items})]))
    assert final["cluster"]["free_whole_gpus"] == result["after"]["free_whole_gpus"]


def test_excluded_nodes_are_planned_as_if_the_snapshot_lacked_them_and_their_pods():
    items = fragmented()
    inputs = [orjson.dumps({"kind": "List", "items": items})]
    full = orjson.loads(_native.plan(inputs, b'{"max_moves": 4}'))
    assert {m["from"]["node"] for m in full["moves"]} == {"n1", "n2"}
    options = orjson.dumps({"max_moves": 4, "exclude_nodes": ["n1"]})
    without = orjson.loads(_native.plan(inputs, options))
    assert without["moves"] and all("n1" not in (m["from"]["node"], m["to"]["node"]) for m in without["moves"])
    kept = [
        i
        for i in items
        if not (i["kind"] == "Node" and i["metadata"]["name"] == "n1") and i.get("spec", {}).get("nodeName") != "n1"
    ]
    edited = orjson.loads(_native.plan([orjson.dumps({"kind": "List", "items": kept})], b'{"max_moves": 4}'))
    same = ("moves", "before", "after", "pods", "movable_pods", "nodes")
    assert {k: without[k] for k in same} == {k: edited[k] for k in same}
    assert without["nodes"] == full["nodes"] - 1 and without["pods"] == full["pods"] - 2


def test_bad_snapshot_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["plan", "--snapshot", str(bad)]) == 2
    assert "bad.json" in capsys.readouterr().err


@pytest.mark.skipif(not DATA.is_dir(), reason=f"openb trace not found at {DATA}")
def test_openb_replayed_snapshot_plans(tmp_path, capsys):
    code, out = run_cli(
        capsys,
        "--replay",
        f"{DATA}/openb_node_list_gpu_node.csv,{DATA}/openb_pod_list_default.csv",
        "--max-moves",
        "50",
        "--output",
        "json",
        "--save-snapshot",
        str(tmp_path / "s.json"),
    )
    assert code == 0
    result = json.loads(out)
    assert result["nodes"] == 1213 and 0 < len(result["moves"]) <= 50
    assert result["after"]["free_whole_gpus"] > result["before"]["free_whole_gpus"]
    assert (tmp_path / "s.json").stat().st_size > 0


def one_small_pod_per_gpu(owned: bool = True) -> list[dict]:
    """The "found when tried" case: every GPU carries one small controller-owned pod, no GPU is free."""
    items: list[dict] = []
    for n in range(4):
        items.append(node(f"m{n}", 4))
        items.extend(pod(f"s{n}{g}", f"m{n}", g, 1000, owned) for g in range(4))
    return items


def write_list(path: Path, items: list[dict]) -> str:
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


def test_every_gpu_with_one_small_pod_frees_six_gpus(tmp_path, capsys):
    snap = write_list(tmp_path / "c.json", one_small_pod_per_gpu())
    code, out = run_cli(capsys, "--snapshot", snap, "--max-moves", "6", "--output", "json")
    assert code == 0
    result = json.loads(out)
    assert result["objective"] == "free-gpus"
    assert result["before"]["free_whole_gpus"] == 0
    assert len(result["moves"]) == 6 and result["after"]["free_whole_gpus"] == 6
    # The frag objective against the cluster's own small pods sees nothing to gain; against whole GPUs it does.
    code, out = run_cli(capsys, "--snapshot", snap, "--max-moves", "6", "--objective", "frag", "--output", "json")
    assert json.loads(out)["before"]["fragmentation"] == 0.0
    code, out = run_cli(
        capsys,
        "--snapshot",
        snap,
        "--max-moves",
        "6",
        "--objective",
        "frag",
        "--workload",
        "whole-gpu",
        "--output",
        "json",
    )
    whole = json.loads(out)
    assert whole["before"]["fragmentation"] > 0 and whole["after"]["free_whole_gpus"] >= 1
    wl = tmp_path / "wl.yaml"
    wl.write_text(yaml.safe_dump([{"gpu": 1.0, "weight": 1}]))
    code, out = run_cli(
        capsys, "--snapshot", snap, "--max-moves", "6", "--objective", "frag", "--workload", str(wl), "--output", "json"
    )
    assert json.loads(out)["before"] == whole["before"]


def test_for_pod_manifest(tmp_path, capsys):
    snap = write_list(tmp_path / "c.json", one_small_pod_per_gpu())
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(pending_pod(gpus=2)))
    code, out = run_cli(capsys, "--snapshot", snap, "--for", str(manifest), "--output", "json")
    assert code == 0
    result = json.loads(out)
    assert result["objective"] == "for" and result["unblocked"] is True
    assert len(result["moves"]) == 2
    target = result["target"]
    assert len(target["gpus"]) == 2 and result["reservation"]["uid"] == "u-big"
    assert {m["from"]["node"] for m in result["moves"]} == {target["node"]}
    assert all(m["to"]["gpus"][0] not in target["gpus"] for m in result["moves"])
    code, out = run_cli(capsys, "--snapshot", snap, "--for", str(manifest))
    assert code == 0 and "fits on" in out and "held for it" in out


def test_for_pod_that_cannot_be_unblocked(tmp_path, capsys):
    snap = write_list(tmp_path / "c.json", one_small_pod_per_gpu(owned=False))
    manifest = tmp_path / "pod.json"
    manifest.write_bytes(orjson.dumps(pending_pod()))
    code, out = run_cli(capsys, "--snapshot", snap, "--for", str(manifest), "--max-moves", "3")
    assert code == 1
    assert "cannot be unblocked within 3 moves" in out
    assert "m0: " in out and "bare pod" in out


def test_for_bad_input(tmp_path, capsys):
    snap = write_list(tmp_path / "c.json", one_small_pod_per_gpu())
    assert main(["plan", "--snapshot", snap, "--for", "team/big"]) == 2
    assert "needs --live" in capsys.readouterr().err
    cpu_only = pending_pod()
    cpu_only["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}}
    manifest = tmp_path / "cpu.json"
    manifest.write_bytes(orjson.dumps(cpu_only))
    assert main(["plan", "--snapshot", snap, "--for", str(manifest)]) == 2
    assert "request no vGPU resource" in capsys.readouterr().err
    assert main(["plan", "--snapshot", snap, "--workload", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_pending_objective_unblocks_the_queue(tmp_path, capsys):
    items = one_small_pod_per_gpu() + [pending_pod("q1"), pending_pod("q2"), pending_pod("q3", gpus=4)]
    snap = write_list(tmp_path / "c.json", items)
    code, out = run_cli(capsys, "--snapshot", snap, "--objective", "pending", "--max-moves", "3", "--output", "json")
    assert code == 0
    result = json.loads(out)
    assert result["pending"] == 3
    # q1 and q2 take a move each; q3 (a whole node) needs four, more than the budget leaves.
    assert result["unblocked_by_moves"] == 2 and len(result["moves"]) == 2
    assert [p["pod"] for p in result["placements"]] == ["team/q1", "team/q2"]
    assert result["placements"][0]["gpus"] != result["placements"][1]["gpus"]
    assert result["baseline"]["planner"] == "greedy" and result["baseline"]["unblocked"] == 0
    code, out = run_cli(capsys, "--snapshot", snap, "--objective", "pending", "--max-moves", "3")
    assert "3 pending vGPU pods: 2 unblocked by 2 moves" in out

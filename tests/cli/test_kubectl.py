"""`kubectl hami why/top/plan` against the test API server, read through the official kubernetes client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hami_fast import _native
from hami_fast.cli import main as hami_fast_main
from hami_fast.explain import explain
from hami_fast.kubectl import main
from hami_fast.manifests import load_objects, load_one

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "examples" / "snapshot.yaml"
POD = ROOT / "examples" / "pod.yaml"
TOO_BIG = ROOT / "examples" / "pod-too-big.yaml"


@pytest.fixture
def cluster(kubeapi):
    """examples/snapshot.yaml loaded into the test API server, plus one pending pod that fits nowhere."""
    kubeapi.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    for obj in load_objects(SNAPSHOT):
        kubeapi.create(obj)
    kubeapi.create(load_one(TOO_BIG, "Pod"))
    kubeapi.create(load_one(POD, "Pod"))
    return kubeapi


def run(capsys, kubeapi, *argv: str) -> tuple[int, str, str]:
    code = main(["--kubeconfig", kubeapi.kubeconfig, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_why_explains_a_pod_that_fits_nowhere_with_what_would_have_to_change(cluster, capsys):
    code, out, err = run(capsys, cluster, "why", "big", "-n", "ml")
    assert code == 0, err
    assert out.startswith("pod ml/big: Pending, scheduler -")
    assert "chosen node: none — the pod fits on none of 4 nodes" in out
    assert "CardInsufficientMemory    3 nodes: node-1, node-2, node-3" in out
    assert "node unregistered          1 node: cpu-1" in out
    assert "needs 40000 MiB on one GPU; the largest free is 32768 MiB on node-1/GPU-node-1-2" in out


def test_why_names_the_best_node_and_its_score_and_json_is_explains_object(cluster, capsys):
    code, out, _ = run(capsys, cluster, "why", "finetune", "-n", "ml")
    assert code == 0
    assert "chosen node: node-1 (score 8.12; node policy binpack)" in out
    assert "top candidates (2 of 2 fitting nodes, best first):" in out
    code, out, _ = run(capsys, cluster, "why", "finetune", "-n", "ml", "-o", "json")
    live = json.loads(out)
    offline = explain(str(SNAPSHOT), str(POD), None, None)
    assert live.keys() == offline.keys()
    for key in ("node", "scores", "failed", "ranked", "node_policy"):
        assert live[key] == offline[key], key


def test_why_all_lists_every_node(cluster, capsys):
    _, out, _ = run(capsys, cluster, "why", "finetune", "-n", "ml", "--all")
    rows = [line.split()[0] for line in out.splitlines() if line.startswith(("node-", "cpu-"))]
    assert sorted(rows) == ["cpu-1", "node-1", "node-2", "node-3"]


def test_why_of_a_missing_pod_is_one_line(cluster, capsys):
    code, out, err = run(capsys, cluster, "why", "nope", "-n", "ml")
    assert code == 2 and out == ""
    assert err == 'kubectl hami why: pod "nope" not found in namespace "ml"\n'


def test_top_nodes_sorted_fullest_first_plain_when_piped(cluster, capsys):
    code, out, _ = run(capsys, cluster, "top", "nodes")
    assert code == 0
    assert "\033[" not in out, "capsys is not a terminal: no colour"
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["NODE", "GPUS", "MEMORY"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert [line.split()[0] for line in lines[1:]] == ["node-3", "node-1", "node-2"]  # 95 %, 44 %, 40 % memory
    assert rows["node-3"][2:4] == ["155648/163840", "95%"]
    assert rows["node-1"][2:4] == ["57344/131072", "44%"]
    pods = {name: int(cells[-3]) for name, cells in rows.items()}
    assert pods == {"node-1": 2, "node-2": 1, "node-3": 2}
    engine = {n["node"]: n for n in orjson.loads(_native.fragmentation([orjson.dumps(_snapshot_list())]))["nodes"]}
    for name, cells in rows.items():
        assert float(cells[-2]) == pytest.approx(engine[name]["fragmentation"], abs=0.005)
        assert int(cells[-1]) == engine[name]["free_whole_gpus"]


def _snapshot_list() -> dict:
    return {"apiVersion": "v1", "kind": "List", "items": load_objects(SNAPSHOT)}


def test_top_colours_on_request_and_sorts_gpus(cluster, capsys):
    _, out, _ = run(capsys, cluster, "top", "nodes", "--color", "always")
    node3 = next(line for line in out.splitlines() if line.startswith("node-3"))
    assert "\033[31m155648/163840  95%\033[0m" in node3  # red above 80 %
    _, out, _ = run(capsys, cluster, "top", "gpus", "--sort", "cores")
    first = out.splitlines()[1].split()
    assert first[:2] == ["node-3", "GPU-node-3-0"] and first[-2:] == ["1", "ok"]
    _, out, _ = run(capsys, cluster, "top", "gpus", "--sort", "name")
    names = [line.split()[1] for line in out.splitlines()[1:]]
    assert names[:2] == ["GPU-node-1-0", "GPU-node-1-1"] and len(names) == 8


def test_plan_is_the_plan_of_hami_fast_plan_live(cluster, capsys):
    code, out, _ = run(capsys, cluster, "plan", "-o", "json")
    assert code == 0
    ours = json.loads(out)
    assert hami_fast_main(["plan", "--live", "--kubeconfig", cluster.kubeconfig, "--output", "json"]) == 0
    theirs = json.loads(capsys.readouterr().out)
    for result in (ours, theirs):
        result.pop("elapsed_ms"), result["baseline"].pop("elapsed_ms")
    assert ours == theirs
    assert ours["nodes"] == 4 and ours["pods"] >= 5


def test_kubectl_finds_the_plugin_on_path():
    """The wheel installs `kubectl-hami` next to the interpreter (kubectl finds plugins by that name)."""
    script = Path(sys.executable).parent / "kubectl-hami"
    assert script.exists()
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "why" in proc.stdout and "top" in proc.stdout and "plan" in proc.stdout


def test_without_a_kubeconfig_it_says_so_in_one_line(tmp_path):
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    script = Path(sys.executable).parent / "kubectl-hami"
    proc = subprocess.run([str(script), "top", "nodes"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "no kubeconfig" in proc.stderr, proc.stderr

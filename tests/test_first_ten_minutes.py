"""What a new user hits in the first ten minutes: every item, through the CLI.

Commands run as separate processes where exit codes, stderr and interpreter exit are the point.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
import yaml
from hami_fast import _native, manifests
from hami_fast.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
HAMI_FAST = str(BIN / "hami-fast")
SNAPSHOT = ROOT / "examples" / "snapshot.yaml"
POD = ROOT / "examples" / "pod.yaml"


def no_cluster_env(tmp_path: Path) -> dict[str, str]:
    """No kubeconfig anywhere and not in a pod."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(tmp_path)
    return env


def hami_fast(*argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([HAMI_FAST, *argv], capture_output=True, text=True, env=env, timeout=timeout)


def one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0, proc.stdout
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip()


# ---- make demo exits 0 every time ------------------------------------------------------------------
def test_demo_exits_zero_a_hundred_times_in_a_row():
    """Granian used to abort at interpreter exit in about 1 run in 20 (a panic that cannot unwind)."""

    def once(i: int) -> tuple[int, str]:
        proc = hami_fast("demo", "--pods", "20", "--seed", str(i), timeout=120)
        return proc.returncode, proc.stderr[-400:]

    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(once, range(100)))
    failures = [(i, err) for i, (code, err) in enumerate(results) if code != 0]
    assert not failures, failures[:3]


def test_demo_tells_a_story_and_keeps_raw_lines_behind_verbose(capsys):
    assert main(["demo", "--pods", "300"]) == 0
    out = capsys.readouterr().out
    assert "Cluster: 50 GPU nodes, 236 GPUs" in out
    table = out.split("Pods by kind:")[1].split("\n\n")[0].splitlines()
    assert table[1].split() == ["POD", "KIND", "PODS", "BOUND", "PENDING", "DENIED", "GPUS", "BOUND", "NODES"]
    kinds = {line.split()[0]: [int(x) for x in line.split()[1:]] for line in table[2:]}
    assert set(kinds) == {"share-small", "share-mid", "whole", "percent", "multi", "large"}
    assert sum(v[0] for v in kinds.values()) == 300
    assert all(v[0] == v[1] + v[2] + v[3] for v in kinds.values())
    assert kinds["large"][2] >= 1, "the demo always has a pending pod to explain"
    for label in ("GPU memory", "GPU cores", "sharing slots", "GPUs in use"):
        assert re.search(rf"{label} .* \d+\.\d %", out), label
    assert re.search(r"Fragmentation: \d+\.\d GPUs", out)
    assert "Why demo-large-" in out and "fits nowhere" in out and "needs 8 such GPUs on one node" in out
    assert re.search(r"/filter +300 +\d+\.\d\d ms +\d+\.\d\d ms", out)
    assert "GPU-0" not in out, "raw allocation annotations only with --verbose"
    assert main(["demo", "--pods", "30", "--verbose"]) == 0
    verbose = capsys.readouterr().out
    assert len(re.findall(r"^demo-\S+ +-> demo-gpu-\d+ +GPU-\S+,NVIDIA,\d+,\d+", verbose, re.M)) == 30


def test_demo_help_describes_every_option():
    demo = build_parser()._subparsers._group_actions[0].choices["demo"]
    options = [a for a in demo._actions if a.option_strings and a.dest != "help"]
    assert {a.dest for a in options} == {"pods", "seed", "verbose"}
    assert all(a.help for a in options)
    assert demo.description


def test_serve_and_descheduler_help_print_go_durations():
    serve = hami_fast("serve", "--help").stdout
    assert "(default 5m0s)" in serve and "(default 28s)" in serve
    descheduler = hami_fast("descheduler", "--help").stdout
    assert "default 5m0s" in descheduler
    for seconds in ("300.0", "28.0", "600.0", "900.0"):
        assert seconds not in serve + descheduler


# ---- one clear line and a non-zero exit ------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [["plan", "--live"], ["descheduler", "--bind", "127.0.0.1:0"], ["plan", "--live", "--apply"]],
    ids=["plan-live", "descheduler", "plan-apply"],
)
def test_no_kubeconfig_is_one_line(tmp_path, argv):
    message = one_line(hami_fast(*argv, env=no_cluster_env(tmp_path)))
    assert "no kubeconfig" in message and str(tmp_path / ".kube" / "config") in message


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--live", "--kubeconfig", "/nonexistent/kubeconfig"],
        ["descheduler", "--kubeconfig", "/nonexistent/kubeconfig"],
        ["serve", "--kubeconfig", "/nonexistent/kubeconfig", "--metrics-bind-address", ""],
    ],
    ids=["plan-live", "descheduler", "serve"],
)
def test_a_missing_kubeconfig_file_is_one_line(tmp_path, argv):
    message = one_line(hami_fast(*argv, env=no_cluster_env(tmp_path)))
    assert message.endswith("kubeconfig /nonexistent/kubeconfig (--kubeconfig): no such file")


def test_a_missing_kubeconfig_env_file_is_an_error_not_the_demo_cluster(tmp_path):
    env = {**no_cluster_env(tmp_path), "KUBECONFIG": str(tmp_path / "nope")}
    message = one_line(hami_fast("serve", "--metrics-bind-address", "", env=env))
    assert f"kubeconfig {tmp_path / 'nope'} (KUBECONFIG): no such file" in message


def test_a_broken_kubeconfig_is_one_line(tmp_path):
    bad = tmp_path / "config"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: 7\n")
    message = one_line(hami_fast("plan", "--live", "--kubeconfig", str(bad), env=no_cluster_env(tmp_path)))
    assert message.startswith(f"hami-fast plan: kubeconfig {bad}:")


@pytest.fixture
def busy_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_serve_on_a_busy_port_is_one_line_and_never_says_serving(tmp_path, busy_port):
    proc = hami_fast(
        "serve", "--demo", "--http_bind", f"127.0.0.1:{busy_port}", "--metrics-bind-address", "", "--log-format", "text"
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert lines[-1] == f"hami-fast serve: cannot listen on 127.0.0.1:{busy_port} (--http_bind): address already in use"
    assert not any(" serving " in line or line.endswith(" serving") for line in lines), lines


def test_serve_with_the_metrics_port_busy_is_one_line(busy_port):
    proc = hami_fast(
        "serve", "--demo", "--http_bind", "127.0.0.1:0", "--metrics-bind-address", f"127.0.0.1:{busy_port}"
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .endswith(f"cannot listen on 127.0.0.1:{busy_port} (--metrics-bind-address): Address already in use")
    )


def test_descheduler_on_a_busy_port_is_one_line(busy_port):
    proc = hami_fast("descheduler", "--snapshot", str(SNAPSHOT), "--bind", f"127.0.0.1:{busy_port}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"hami-fast descheduler: cannot listen on 127.0.0.1:{busy_port} (--bind): address already in use"
    )


def _first_log_line(argv: list[str]) -> tuple[str, int]:
    port = _free_port()
    proc = subprocess.Popen(
        [HAMI_FAST, *[a.replace("PORT", str(port)) for a in argv]],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if "serving" in line or "descheduler API on" in line:
                return line, port
            assert line or proc.poll() is None, "exited before serving"
        raise AssertionError("no serving line")
    finally:
        proc.terminate()
        proc.wait(20)
        proc.stderr.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serving_is_logged_once_the_port_accepts_and_logs_default_to_json():
    serve = ["serve", "--snapshot", str(SNAPSHOT), "--http_bind", "127.0.0.1:PORT", "--metrics-bind-address", ""]
    line, port = _first_log_line(serve)
    entry = json.loads(line)
    assert entry["msg"] == "serving" and entry["address"] == f"http://127.0.0.1:{port}"
    line, port = _first_log_line(["descheduler", "--snapshot", str(SNAPSHOT), "--bind", "127.0.0.1:PORT"])
    assert json.loads(line)["logger"] == "hami_fast.descheduler", "the descheduler logs JSON by default too"
    line, _ = _first_log_line(
        ["descheduler", "--snapshot", str(SNAPSHOT), "--bind", "127.0.0.1:PORT", "--log-format", "text"]
    )
    assert re.match(r"\d{4}-\d\d-\d\dT[\d:.]+Z info hami_fast.descheduler descheduler API on 127.0.0.1:\d+", line)


def test_serve_log_line_means_the_port_already_accepts():
    port = _free_port()
    proc = subprocess.Popen(
        [HAMI_FAST, "serve", "--demo", "--http_bind", f"127.0.0.1:{port}", "--metrics-bind-address", ""],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        while "serving" not in (line := proc.stderr.readline()):
            assert line, "exited before serving"
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            pass  # no retry: the listener was up before the line was written
    finally:
        proc.terminate()
        proc.wait(20)
        proc.stderr.close()


# ---- policies ----------------------------------------------------------------------------------------
def test_unknown_policy_flags_are_rejected_with_the_valid_names(tmp_path):
    names = _native.node_policy_names()
    assert names[:2] == ["binpack", "spread"] and "fgd" in names
    proc = hami_fast("explain", "--snapshot", str(SNAPSHOT), "--pod", str(POD), "--node-scheduler-policy", "foo")
    assert proc.returncode == 2
    assert f'unknown node scheduler policy "foo" (valid: {", ".join(names)})' in proc.stderr
    proc = hami_fast("explain", "--snapshot", str(SNAPSHOT), "--pod", str(POD), "--gpu-scheduler-policy", "fast")
    assert proc.returncode == 2 and "unknown GPU scheduler policy" in proc.stderr
    message = one_line(hami_fast("serve", "--demo", "--node-scheduler-policy", "foo", "--metrics-bind-address", ""))
    assert (
        message
        == f'hami-fast serve: option --node-scheduler-policy: unknown node scheduler policy "foo" (valid: {", ".join(names)})'
    )
    env = {**no_cluster_env(tmp_path), "HAMI_FAST_GPU_SCHEDULER_POLICY": "nope"}
    assert "unknown GPU scheduler policy" in one_line(hami_fast("serve", "--demo", env=env))
    help_text = " ".join(hami_fast("serve", "--help").stdout.split())
    assert ", ".join(names) in help_text


def test_an_unknown_policy_annotation_acts_as_binpack_as_in_hami(tmp_path, capsys):
    pod = yaml.safe_load(POD.read_text())
    pod["metadata"]["annotations"] = {"hami.io/node-scheduler-policy": "foo"}
    path = tmp_path / "pod.json"
    path.write_bytes(orjson.dumps(pod))
    assert main(["explain", "--snapshot", str(SNAPSHOT), "--pod", str(path), "--output", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["node_policy"] == "binpack" and result["node"] == "node-1"


# ---- explain ---------------------------------------------------------------------------------------
def test_a_snapshot_without_nodes_says_so(tmp_path):
    message = one_line(hami_fast("explain", "--snapshot", str(POD), "--pod", str(POD)))
    assert message.startswith(f"hami-fast explain: {POD}: the snapshot has no nodes (found Pod)")
    message = one_line(hami_fast("serve", "--snapshot", str(POD), "--metrics-bind-address", ""))
    assert message.startswith(f"hami-fast serve: {POD}: the snapshot has no nodes (found Pod)")


def big_snapshot(tmp_path: Path, nodes: int = 400) -> Path:
    from hami_fast.demo.cluster import demo_nodes

    path = tmp_path / "big.json"
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": demo_nodes(nodes)}))
    return path


def test_explain_text_shows_choice_top_candidates_and_failures_by_reason(tmp_path, capsys):
    pod = yaml.safe_load(POD.read_text())
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] = 20000
    path = tmp_path / "pod.json"
    path.write_bytes(orjson.dumps(pod))
    snap = big_snapshot(tmp_path)
    assert main(["explain", "--snapshot", str(snap), "--pod", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) < 25, "not one line per node"
    assert lines[0].startswith("chosen node: demo-gpu-")
    assert "top candidates (5 of 267 fitting nodes, best first):" in out
    assert re.search(r"CardInsufficientMemory +133 nodes: demo-gpu-002, demo-gpu-005, demo-gpu-008, … 130 more", out)
    candidates = [line.split() for line in lines if re.match(r"  demo-gpu-\d+ +\d", line)]
    assert candidates[0][0] == lines[0].split()[2] and candidates[0][-1] == "chosen"
    assert main(["explain", "--snapshot", str(snap), "--pod", str(path), "--all"]) == 0
    assert len([line for line in capsys.readouterr().out.splitlines() if line.startswith("demo-gpu-")]) == 400


def test_explain_under_head_has_no_broken_pipe(tmp_path):
    snap = big_snapshot(tmp_path, 3000)
    explain = subprocess.Popen(
        [HAMI_FAST, "explain", "--snapshot", str(snap), "--pod", str(POD), "--all"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    head = subprocess.run(["head", "-n", "2"], stdin=explain.stdout, capture_output=True, timeout=60)
    explain.stdout.close()
    err = explain.stderr.read().decode()
    explain.stderr.close()
    assert explain.wait(60) == 0 and err == "", err
    assert head.stdout.decode().startswith("chosen node: ")


# ---- YAML, --version, --plot ------------------------------------------------------------------------
def test_yaml_snapshots_load_natively_and_as_pyyaml_reads_them(tmp_path):
    text = SNAPSHOT.read_text()
    assert manifests.load_objects(SNAPSHOT) == yaml.safe_load(text)["items"]
    multi = tmp_path / "multi.yaml"
    multi.write_text("---\n" + POD.read_text() + "\n---\n\n---\n" + POD.read_text())
    assert manifests.load_objects(multi) == [yaml.safe_load(POD.read_text())] * 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\n---\nmetadata: [oops\n")
    with pytest.raises(manifests.ManifestError, match=r"^decode .*bad.yaml:4:1: document 1: did not find expected"):
        manifests.load_objects(bad)
    with pytest.raises(_native.EngineError) as raised:
        _native.yaml_to_json(bad.read_bytes(), "snap.yaml")
    error = raised.value
    assert (error.kind, error.object, error.field) == ("decode", "snap.yaml:4:1", "document 1")


# A malformed manifest, for every command that reads one: exit 2, one line naming the file, its
# position and document, no traceback. {bad} is the malformed file, {snap}/{pod} good ones.
MALFORMED_YAML = "kind: List\nitems:\n- kind: Node\n  metadata: {name: a\n"
MANIFEST_COMMANDS = {
    "explain --snapshot": ["explain", "--snapshot", "{bad}", "--pod", "{pod}"],
    "explain --pod": ["explain", "--snapshot", "{snap}", "--pod", "{bad}"],
    "plan --snapshot": ["plan", "--snapshot", "{bad}"],
    "plan --for": ["plan", "--snapshot", "{snap}", "--for", "{bad}"],
    "plan --workload": ["plan", "--snapshot", "{snap}", "--workload", "{bad}"],
    "serve --snapshot": ["serve", "--snapshot", "{bad}", "--http_bind", "127.0.0.1:0"],
}


@pytest.mark.parametrize("command", list(MANIFEST_COMMANDS))
def test_a_malformed_manifest_is_one_line_naming_file_position_and_document(tmp_path, command):
    bad = tmp_path / "broken.yaml"
    bad.write_text(MALFORMED_YAML)
    names = {"bad": str(bad), "snap": str(SNAPSHOT), "pod": str(POD)}
    argv = [a.format(**names) for a in MANIFEST_COMMANDS[command]]
    line = one_line(hami_fast(*argv, env=no_cluster_env(tmp_path)))
    prog = " ".join(argv[:1])
    assert re.fullmatch(
        rf"hami-fast {prog}: (--workload: )?decode {re.escape(str(bad))}:5:1: document 0: "
        r"did not find expected ',' or '\}', while parsing a flow mapping at line 4 column 13",
        line,
    ), line


def test_manifests_that_are_not_one_document_or_not_objects_are_one_line(tmp_path):
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    line = one_line(hami_fast("explain", "--snapshot", str(listed), "--pod", str(POD), env=no_cluster_env(tmp_path)))
    assert line == f"hami-fast explain: {listed}: document 0 is a list, not a Kubernetes object"
    two = tmp_path / "two.yaml"
    two.write_text("- {gpu_milli: 500}\n---\n- {gpu_milli: 1000}\n")
    line = one_line(hami_fast("plan", "--snapshot", str(SNAPSHOT), "--workload", str(two)))
    assert line == f"hami-fast plan: --workload: {two}: expected one YAML or JSON document, found 2"


def test_version():
    proc = hami_fast("--version")
    assert proc.returncode == 0
    assert re.fullmatch(
        rf"hami-fast \S+ \(engine hami-core {re.escape(_native.__version__)}, Python 3\.\d+\.\d+\)\n", proc.stdout
    )


def test_plot_says_where_it_wrote(tmp_path):
    from test_sim import write_cluster

    nodes, pods = write_cluster(tmp_path)
    png = tmp_path / "figs" / "run.png"
    proc = hami_fast("simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "bestfit", "--plot", str(png))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"wrote {png}" and png.exists()


# ---- on PATH, README, sample snapshot, CI order -------------------------------------------------------
def test_make_install_user_puts_the_console_scripts_on_a_path(tmp_path):
    bindir = tmp_path / "bin"
    proc = subprocess.run(
        ["make", "-s", "install-user", f"BINDIR={bindir}", f"VENV={BIN.parent}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"add {bindir} to PATH" in proc.stdout
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    version = subprocess.run(["hami-fast", "--version"], capture_output=True, text=True, env=env, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("hami-fast ")
    plugin = subprocess.run(["kubectl-hami", "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert plugin.returncode == 0 and "why" in plugin.stdout


def test_the_sample_snapshot_works_with_explain_and_serve(capsys):
    assert main(["explain", "--snapshot", str(SNAPSHOT), "--pod", str(POD), "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["node"] == "node-1"
    from serving import Service

    with Service(snapshot=str(SNAPSHOT)) as svc:
        pod = yaml.safe_load(POD.read_text())
        pod["metadata"]["uid"] = "uid-finetune"
        result = svc.post("/filter", {"Pod": pod, "Nodes": None, "NodeNames": ["node-1", "node-2", "node-3", "cpu-1"]})
        assert result["NodeNames"] == ["node-1"] and result["Error"] == ""


def test_readme_covers_the_first_ten_minutes():
    readme = (ROOT / "README.md").read_text()
    for needle in (
        "Python ≥ 3.11",
        "make install-user",
        "source .venv/bin/activate",
        "examples/snapshot.yaml",
        "thousandths of a GPU",
        "within 0.02 pp",
        "within 0.25 pp",
        ".ci/run",
        "make image",
    ):
        assert needle in readme, needle
    assert "reproduces the paper's published results exactly" not in readme


def test_ci_builds_the_control_plane_before_make_test():
    """tests/test_chart.py loads the rendered config into kube-scheduler: it must not be skipped in CI."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    build = next(
        i for i, line in enumerate(lines) if "build-control-plane.sh" in line and not line.lstrip().startswith("#")
    )
    test = next(i for i, line in enumerate(lines) if line.strip().startswith("make test"))
    assert build < test
    assert any("KUBE_SCHEDULER=" in line for line in lines[build:test])


def test_the_demo_package_imports_in_one_direction():
    """serve imports demo.cluster (pure data); the demo driver imports serve; nothing imports back."""
    import ast

    def imports(module: Path) -> set[str]:
        found = set()
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        return found

    package = ROOT / "python" / "hami_fast"
    cluster = imports(package / "demo" / "cluster.py")
    assert not {m for m in cluster if m.startswith("hami_fast")}, cluster
    serve = imports(package / "server" / "serve.py")
    assert {m for m in serve if m.startswith("hami_fast.demo")} == {"hami_fast.demo.cluster"}
    assert "hami_fast.server.serve" in imports(package / "demo" / "run.py")
    assert not (package / "demo.py").exists()

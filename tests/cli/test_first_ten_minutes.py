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
from hami_fast.descheduler.view import ClusterView

ROOT = Path(__file__).resolve().parents[2]
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
    with pytest.raises(manifests.ManifestError, match=r"^decode .*bad.yaml:3:11: document 1: did not find expected"):
        manifests.load_objects(bad)
    with pytest.raises(_native.EngineError) as raised:
        _native.yaml_to_json(bad.read_bytes(), "snap.yaml")
    error = raised.value
    assert (error.kind, error.object, error.field) == ("decode", "snap.yaml:3:11", "document 1")


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
        rf"hami-fast {prog}: (--workload: )?decode {re.escape(str(bad))}:4:13: document 0: "
        r"did not find expected ',' or '\}' in the flow mapping that starts here",
        line,
    ), line
    assert "line" not in line.split("document 0")[1], "one position, not two"


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
    from openb_trace import write_cluster

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
    """tests/infra/test_chart.py loads the rendered config into kube-scheduler: it must not be skipped in CI."""
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


# ==== second pass: what a new operator still trips on ================================================
HUGE_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: ml}
spec:
  containers:
  - name: main
    resources:
      limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: LIMIT, nvidia.com/gpucores: CORES}
"""


def pod_file(tmp_path: Path, gpumem: str = "12000", gpucores: str = "30", name: str = "pod.yaml") -> Path:
    path = tmp_path / name
    path.write_text(HUGE_POD.replace("LIMIT", gpumem).replace("CORES", gpucores))
    return path


# ---- 1. nothing is silent for long -------------------------------------------------------------------
def fake_venv(tmp_path: Path, pip_output: str, pip_status: int = 0) -> Path:
    """A .venv whose python plays `pip install -v` (printing `pip_output`) and whose hami-fast prints a version."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pip-output").write_text(pip_output)
    python = venv / "bin" / "python"
    python.write_text(f"#!/bin/sh\ncat {venv / 'pip-output'}\nexit {pip_status}\n")
    version = venv / "bin" / "hami-fast"
    version.write_text("#!/bin/sh\necho 'hami-fast 9.9 (fake)'\n")
    python.chmod(0o755)
    version.chmod(0o755)
    return venv


def test_make_install_says_each_stage_and_the_builds_progress(tmp_path):
    crates = "".join(f"   Compiling crate{i} v1.0.{i}\n" for i in range(23))
    packages = "".join(f"Collecting package{i}>=1 (from hami-fast==0.1.0)\n  Downloading x.whl\n" for i in range(12))
    pip_output = (
        f"Using pip 26\n{packages}  Running command Building editable for hami-fast (pyproject.toml)\n"
        f"{crates}   Compiling hami-core v0.1.0\n   Compiling hami-py v0.1.0\n"
        "    Finished `release` profile [optimized] target(s) in 71.20s\nSuccessfully installed hami-fast-0.1.0\n"
    )
    venv = fake_venv(tmp_path, pip_output)
    proc = subprocess.run(
        [str(ROOT / "scripts" / "install.sh")],
        cwd=ROOT,
        env={**os.environ, "VENV": str(venv)},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"==> installing hami-fast into {venv}: Python dependencies and the Rust engine")
    assert [line for line in lines if line.startswith("    pip: collecting")] == [
        "    pip: collecting package0>=1 (package 1)",
        "    pip: collecting package10>=1 (package 11)",
    ]
    cargo = [line for line in lines if line.startswith("    cargo: compiling")]
    assert cargo == [
        "    cargo: compiling crate0 (crate 1)",
        "    cargo: compiling crate10 (crate 11)",
        "    cargo: compiling crate20 (crate 21)",
        "    cargo: compiling hami-core (crate 24)",
        "    cargo: compiling hami-py (crate 25)",
    ]
    assert "    cargo: Finished `release` profile [optimized] target(s) in 71.20s" in lines
    assert "    pip: installed 1 package" in lines
    assert re.fullmatch(
        rf"==> installed in \d+ s: {re.escape(str(venv))}/bin/hami-fast \(hami-fast 9\.9 \(fake\)\)", lines[-1]
    )
    assert (venv / "install.log").read_text() == pip_output, "pip's whole output is kept"


def test_a_failing_install_shows_the_end_of_pips_output(tmp_path):
    venv = fake_venv(tmp_path, "   Compiling hami-core v0.1.0\nerror[E0425]: cannot find value `x`\n", pip_status=1)
    proc = subprocess.run(
        [str(ROOT / "scripts" / "install.sh")],
        cwd=ROOT,
        env={**os.environ, "VENV": str(venv)},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert f"make install failed; the last lines of {venv}/install.log:" in proc.stderr
    assert "error[E0425]: cannot find value `x`" in proc.stderr


def test_make_demo_says_what_it_runs():
    dry = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    assert "scripts/install.sh" in dry and "==> hami-fast demo --pods 300" in dry


def test_a_sweep_off_a_terminal_reports_progress_on_stderr_and_captions_its_table(tmp_path):
    from openb_trace import write_cluster

    nodes, pods = write_cluster(tmp_path, nodes=12, pods=30)
    argv = ["simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "bestfit,fgd", "--seeds", "1-3"]
    proc = hami_fast(*argv, "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == "simulate: 6 replays on 1 process"
    done = [
        int(m.group(1))
        for line in lines
        if (m := re.match(r"simulate: (\d)/6 runs done \(pods/\w+/\d\), \d+ s elapsed, about \d+ s left$", line))
    ]
    assert done == [1, 2, 3, 4, 5, 6] and len(lines) == 7, lines
    out = proc.stdout
    assert out.startswith(
        "Unallocated GPU % at 100 % of capacity arrived (lower is better), mean over 3 seeds per cell; "
    )
    assert "in parentheses the FGD paper's published mean" in out.splitlines()[0]
    assert hami_fast(*argv, "--jobs", "1", "--no-progress").stderr == ""


def test_sweep_outputs_asked_of_one_run_are_written_not_ignored(tmp_path):
    from openb_trace import write_cluster

    nodes, pods = write_cluster(tmp_path, nodes=6, pods=12)
    figures, table = tmp_path / "figs", tmp_path / "t.md"
    proc = hami_fast(
        "simulate", "--nodes", str(nodes), "--pods", str(pods), "--policy", "fgd", "--figures", str(figures),
        "--table", str(table), "--no-progress",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in figures.iterdir()) == ["alloc_pods.png", "frag_pods.png"]
    assert "| pods | fgd | 1 |" in table.read_text()
    both = hami_fast("simulate", "--nodes", str(nodes), "--pods", str(pods), "--seed", "1", "--seeds", "1-2")
    assert "argument --seeds: not allowed with argument --seed" in one_line(both)


def test_progress_lines_come_at_each_tenth():
    import io

    from hami_fast.sim.runner import Progress

    stream = io.StringIO()
    progress = Progress(25, None, stream=stream)
    for _ in range(25):
        progress.step("t/p/1")
    assert [int(line.split()[1].split("/")[0]) for line in stream.getvalue().splitlines()] == [
        3, 5, 8, 10, 13, 15, 18, 20, 23, 25,
    ]  # fmt: skip


def test_the_readmes_figures_folder_is_ignored_by_git():
    readme = (ROOT / "README.md").read_text()
    folders = set(re.findall(r"--figures (\S+)", readme))
    assert folders == {"out/"}, folders
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    check = subprocess.run(["git", "check-ignore", "-q", "out/bars_gpushare.png"], cwd=ROOT)
    assert check.returncode == 0, "out/ is not git-ignored"


# ---- 2. reason counts that add up --------------------------------------------------------------------
def test_the_demos_pending_pod_counts_each_node_once(capsys):
    assert main(["demo", "--pods", "300", "--verbose"]) == 0
    out = capsys.readouterr().out
    section = out.split(" fits nowhere (hami-fast explain), one reason per node:\n")[1].split("  container ")[0]
    groups = [(int(m.group(1)), m.group(2)) for m in re.finditer(r"^ +(\d+) nodes?: (.+)$", section, re.M)]
    examined = int(re.search(r"^ +(\d+) nodes examined, none fits$", section, re.M).group(1))
    assert examined == 50
    assert sum(n for n, _ in groups) == examined, section
    assert not re.search(r"\b1 nodes\b", out)
    assert any("also has" in text or "also have" in text for _, text in groups), "a node with several reasons says so"
    assert (
        "hami-fast descheduler --snapshot examples/snapshot.yaml (then open http://127.0.0.1:8083/: the GPU map)" in out
    )
    pending = [line for line in out.splitlines() if re.match(r"demo-\S+ +-> - ", line)]
    assert pending and all("{" not in line for line in pending), pending
    for line in pending:
        summary = re.search(r"pending: (.+) \((\d+) nodes\)$", line)
        assert summary, line
        assert sum(int(part.split()[0]) for part in summary.group(1).split(", ")) == int(summary.group(2)) == 50


def test_explain_groups_failing_nodes_by_one_verdict_each(tmp_path, capsys):
    snap = big_snapshot(tmp_path, 120)
    big = pod_file(tmp_path, "70000", "60")
    assert main(["explain", "--snapshot", str(snap), "--pod", str(big), "--output", "json"]) in (0, 1)
    result = json.loads(capsys.readouterr().out)
    assert set(result["verdicts"]) == set(result["failed"])
    for node, verdict in result["verdicts"].items():
        assert verdict["reason"] in result["failed"][node] and verdict["reason"] not in verdict["others"]
    assert main(["explain", "--snapshot", str(snap), "--pod", str(big)]) in (0, 1)
    text = capsys.readouterr().out
    grouped = re.findall(
        r"^  \S+(?: \S+)? +(\d+) nodes?: ", text.split("by the reason that decides each node:")[1], re.M
    )
    assert sum(map(int, grouped)) == len(result["failed"])


# ---- 3. a pod that can never fit, and explain's exit status ---------------------------------------------
def test_a_pod_larger_than_any_gpu_is_told_so_by_explain_and_plan(tmp_path):
    huge = pod_file(tmp_path, "200000", "50")
    proc = hami_fast("explain", "--snapshot", str(SNAPSHOT), "--pod", str(huge))
    assert proc.returncode == 1, proc.stderr
    assert (
        "needs 200000 MiB on one GPU; no GPU in the cluster is that large: the largest has 81920 MiB "
        "(node-3/GPU-node-3-0)" in proc.stdout
    )
    assert "the largest free" not in proc.stdout, "freeing memory would not help"
    plan = hami_fast("plan", "--snapshot", str(SNAPSHOT), "--for", str(huge))
    assert plan.returncode == 1
    assert plan.stdout.splitlines()[0] == (
        "pod ml/huge can never fit, whatever moves: it asks 200000 MiB on one GPU and no GPU in the cluster "
        "is that large: the largest has 81920 MiB (node-3/GPU-node-3-0)"
    )


def test_a_pending_pod_that_can_never_fit_is_told_so_by_the_pending_plan_and_the_gpu_map(tmp_path):
    from hami_fast.descheduler import gpumap
    from k8s_objects import pending_pod

    items = [*manifests.load_objects(SNAPSHOT), pending_pod("huge", 1, 200000), pending_pod("small", 1, 1000)]
    snap = tmp_path / "pending.json"
    snap.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    never = (
        "it asks 200000 MiB on one GPU and no GPU in the cluster is that large: the largest has 81920 MiB "
        "(node-3/GPU-node-3-0)"
    )
    proc = hami_fast("plan", "--snapshot", str(snap), "--objective", "pending", "--max-moves", "4")
    assert f"  team/huge can never fit, whatever moves: {never}" in proc.stdout.splitlines()
    assert "team/small can never fit" not in proc.stdout
    data = gpumap.map_data(ClusterView.of_snapshot(snap.read_bytes()), [])
    assert {q["pod"]: q["never"] for q in data["pending"]} == {"team/huge": never, "team/small": None}
    assert '"can never fit: " + q.never' in gpumap.page_template()


def test_a_cluster_without_a_usable_gpu_says_so_once(tmp_path):
    cpu_only = [o for o in manifests.load_objects(SNAPSHOT) if o["metadata"]["name"] == "cpu-1"]
    snap = tmp_path / "cpu.json"
    snap.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": cpu_only}))
    proc = hami_fast("explain", "--snapshot", str(snap), "--pod", str(POD))
    assert proc.returncode == 1
    assert proc.stdout.strip().splitlines()[-2:] == [
        "  container main: needs 1 GPU with 12000 MiB and 30% cores each",
        "    no GPU in the cluster is usable: no node has a GPU registered with HAMi "
        "(annotation hami.io/node-nvidia-register)",
    ]


def test_explain_exit_status_is_0_fits_1_fits_nowhere_2_bad_input(tmp_path):
    too_big = ROOT / "examples" / "pod-too-big.yaml"
    statuses = {
        "fits": hami_fast("explain", "--snapshot", str(SNAPSHOT), "--pod", str(POD)).returncode,
        "fits nowhere": hami_fast("explain", "--snapshot", str(SNAPSHOT), "--pod", str(too_big)).returncode,
        "fits nowhere, json": hami_fast(
            "explain", "--snapshot", str(SNAPSHOT), "--pod", str(too_big), "--output", "json"
        ).returncode,
        "bad quantity": hami_fast(
            "explain", "--snapshot", str(SNAPSHOT), "--pod", str(pod_file(tmp_path, "abc"))
        ).returncode,
        "missing file": hami_fast("explain", "--snapshot", str(tmp_path / "nope.yaml"), "--pod", str(POD)).returncode,
    }
    assert statuses == {"fits": 0, "fits nowhere": 1, "fits nowhere, json": 1, "bad quantity": 2, "missing file": 2}
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert (
        "**Exit status** (for scripts): `0` the pod fits (a node is chosen), `1` it fits on no node, `2` bad input"
        in readme
    )
    assert "0 the pod fits" in " ".join(hami_fast("explain", "--help").stdout.split())


# ---- 4. messages that point the right way --------------------------------------------------------------
def test_an_unreadable_gpumem_names_the_field_and_the_quantity(tmp_path):
    message = one_line(hami_fast("explain", "--snapshot", str(SNAPSHOT), "--pod", str(pod_file(tmp_path, "abc"))))
    assert message == (
        'hami-fast explain: Pod ml/huge: container main: nvidia.com/gpumem: "abc" is not a whole number of MiB; '
        "HAMi ignores the container's vGPU request"
    )


def test_a_gpumem_written_in_bytes_says_the_field_counts_mib(tmp_path):
    message = one_line(hami_fast("explain", "--snapshot", str(SNAPSHOT), "--pod", str(pod_file(tmp_path, "16Gi"))))
    assert message.endswith(
        'nvidia.com/gpumem: "16Gi" is 17179869184 MiB, more than 2147483647 (the field counts MiB: for 16Gi of '
        "memory write 16384); HAMi ignores the container's vGPU request"
    )
    proc = hami_fast("explain", "--snapshot", str(SNAPSHOT), "--pod", str(pod_file(tmp_path, "1Gi")))
    assert proc.returncode == 1, "1Gi is 1073741824 MiB: no GPU is that large"
    assert proc.stderr == (
        'note: container main: nvidia.com/gpumem: "1Gi" is read as 1073741824 MiB '
        "(the field counts MiB: for 1Gi of memory write 1024)\n"
    )
    assert "no GPU in the cluster is that large" in proc.stdout


def test_a_snapshot_given_to_simulate_is_not_a_trace_csv():
    message = one_line(hami_fast("simulate", "--nodes", str(SNAPSHOT), "--pods", str(SNAPSHOT)))
    assert message.startswith(
        f"hami-fast simulate: decode {SNAPSHOT}:1: not a trace CSV: want an openb node list whose first line is "
        "the header sn,cpu_milli,memory_mib,gpu,model, found "
    )
    assert message.endswith("a cluster snapshot (YAML or JSON) is for explain, serve and plan --snapshot")


def test_an_unregistered_node_keeps_hamis_word_and_says_why(tmp_path):
    proc = hami_fast("explain", "--snapshot", str(SNAPSHOT), "--pod", str(POD))
    lines = proc.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if re.match(r"  node unregistered +1 node: cpu-1$", line))
    assert lines[at + 1].strip() == "not registered with HAMi: annotation hami.io/node-nvidia-register not found"
    every = hami_fast("explain", "--snapshot", str(SNAPSHOT), "--pod", str(POD), "--all").stdout
    assert re.search(
        r"^cpu-1 +- +node unregistered \(not registered with HAMi: annotation hami.io/node-nvidia-register not found\)$",
        every,
        re.M,
    )


def test_plan_says_why_nothing_is_movable():
    proc = hami_fast("plan", "--snapshot", str(SNAPSHOT))
    assert proc.returncode == 0
    tail = proc.stdout.strip().splitlines()[-3:]
    assert tail[0].startswith("5 GPU pods (0 movable) on 4 nodes; budget 0 moves")
    assert tail[1] == "  5 not movable: bare pod (no controller owner): it would not be recreated"
    assert tail[2] == "  budget 0 moves: the default is 5 % of the GPU pods, rounded down; --max-moves sets it"


def test_a_capped_gpucores_is_noted_not_silent(tmp_path):
    capped = pod_file(tmp_path, "12000", "300")
    proc = hami_fast("explain", "--snapshot", str(SNAPSHOT), "--pod", str(capped))
    assert proc.returncode == 0
    assert proc.stderr == "note: container main: nvidia.com/gpucores: 300 is more than 100 %; HAMi takes 100\n"
    assert ",12000,100:;" in proc.stdout, "scheduled as HAMi does, with 100"
    result = json.loads(
        hami_fast("explain", "--snapshot", str(SNAPSHOT), "--pod", str(capped), "--output", "json").stdout
    )
    assert result["notes"] == ["container main: nvidia.com/gpucores: 300 is more than 100 %; HAMi takes 100"]


def test_the_served_webhook_warns_of_a_capped_gpucores(tmp_path):
    from serving import Service

    pod = yaml.safe_load(pod_file(tmp_path, "12000", "300").read_text())
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    review["request"] = {"uid": "u1", "namespace": "ml", "object": pod}
    with Service(snapshot=str(SNAPSHOT)) as svc:
        response = svc.post("/webhook", review)["response"]
    assert response["allowed"] is True
    assert response["warnings"] == [
        "hami-fast: container main: nvidia.com/gpucores: 300 is more than 100 %; HAMi takes 100"
    ]


# ---- 5. nonsense numbers and other newcomer mistakes: exit 2, one line ----------------------------------
@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["demo", "--pods", "-5"], "argument --pods: want a whole number of at least 1, got '-5'"),
        (["demo", "--pods", "0"], "argument --pods: want a whole number of at least 1, got '0'"),
        (["demo", "--pods", "many"], "argument --pods: want a whole number of at least 1, got 'many'"),
        (["explain", "--snapshot", "s", "--pod", "p", "--top", "-1"], "argument --top: want a whole number"),
        (["simulate", "--nodes", "n", "--pods", "p", "--jobs", "0"], "argument --jobs: want a whole number"),
        (["simulate", "--nodes", "n", "--pods", "p", "--tune", "-1"], "argument --tune: want a number of at least 0"),
        (["simulate", "--nodes", "n", "--pods", "p", "--tune", "nan"], "argument --tune: want a number of at least 0"),
        (["plan", "--snapshot", "s", "--max-moves", "-3"], "argument --max-moves: want a whole number of at least 0"),
        (["plan", "--replay", "n,p", "--arrived", "0"], "argument --arrived: want a number above 0"),
        (["demo", "--podz", "3"], "hami-fast demo: unrecognized arguments: --podz 3"),
        (["descheduler", "--interval", "5"], "hami-fast descheduler: unrecognized arguments: --interval 5"),
        (["explian"], "invalid choice: 'explian'"),
    ],
)
def test_nonsense_options_are_one_line_and_exit_2(argv, needle):
    proc = hami_fast(*argv)
    assert proc.returncode == 2
    message = one_line(proc)
    assert needle in message and message.endswith("--help)"), message


def test_a_bad_seed_list_is_one_line(tmp_path):
    from openb_trace import write_cluster

    nodes, pods = write_cluster(tmp_path, nodes=3, pods=5)
    for seeds in ("-5", "9-3", "x"):
        proc = hami_fast("simulate", "--nodes", str(nodes), "--pods", str(pods), "--seeds", seeds)
        assert proc.returncode == 2 and f"--seeds '{seeds}': want N, N-M or a comma list" in one_line(proc)


def test_plan_options_that_do_nothing_here_are_refused():
    for flag, value in (("--policy", "fgd"), ("--seed", "3"), ("--arrived", "80"), ("--save-snapshot", "s.json")):
        message = one_line(hami_fast("plan", "--snapshot", str(SNAPSHOT), flag, value))
        assert message == f"hami-fast plan: {flag} applies to --replay only (the trace replayed into a snapshot)"
    message = one_line(hami_fast("plan", "--snapshot", str(SNAPSHOT), "--workload", "whole"))
    assert message == "hami-fast plan: --workload whole: want typical, whole-gpu or a JSON/YAML file of task types"


def test_kubectl_hami_nonsense_is_one_line():
    proc = subprocess.run([str(BIN / "kubectl-hami"), "why", "p", "--top", "-1"], capture_output=True, text=True)
    assert proc.returncode == 2 and "argument --top: want a whole number of at least 1" in one_line(proc)


def test_files_of_the_wrong_kind_are_one_line(tmp_path):
    from openb_trace import write_cluster

    nodes, pods = write_cluster(tmp_path, nodes=3, pods=5)
    png = tmp_path / "figure.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    cases = {
        ("explain", "--snapshot", str(nodes), "--pod", str(POD)): "it looks like a trace CSV, which simulate",
        ("explain", "--snapshot", str(png), "--pod", str(POD)): f"{png}: a binary file, not YAML or JSON",
        ("explain", "--snapshot", str(tmp_path), "--pod", str(POD)): f"{tmp_path}: Is a directory",
        ("simulate", "--nodes", str(nodes), "--pods", str(tmp_path)): f"{tmp_path}: a directory, not a file",
        ("plan", "--replay", f"{nodes},{tmp_path / 'nope.csv'}"): f"--replay {tmp_path / 'nope.csv'}: no such file",
        ("simulate", "--from-results", str(nodes), "--nodes", str(nodes), "--pods", str(pods)): (
            f"--from-results {nodes}:1: not a JSON line"
        ),
        ("simulate", "--nodes", str(nodes), "--pods", str(pods), "--plot", str(tmp_path / "run.txt")): (
            "want an image file ending in .png"
        ),
        (
            "plan",
            "--replay",
            f"{nodes},{pods}",
            "--save-snapshot",
            "/proc/nope/s.json",
        ): "/proc/nope/s.json: No such file",
    }
    broken_config = tmp_path / "config.yaml"
    broken_config.write_text("kube-qps: [1\n")
    cases[("serve", "--config", str(broken_config))] = (
        f"config file decode {broken_config}:1:11: document 0: did not find expected ',' or ']' in the flow "
        "sequence that starts here"
    )
    cases[("serve", "--config", str(tmp_path / "nope.yaml"))] = f"{tmp_path / 'nope.yaml'}: No such file or directory"
    for argv, needle in cases.items():
        message = one_line(hami_fast(*argv))
        assert needle in message, (argv, message)


# ---- 6. finding things ---------------------------------------------------------------------------------
def test_the_readmes_first_screen_says_where_things_are():
    first_screen = " ".join((ROOT / "README.md").read_text().splitlines()[:30])
    for needle in (
        ".ci/run",
        "about 31 min",
        "make test",
        "examples/",
        "GPU map",
        "hami-fast descheduler --snapshot",
        "8083",
    ):
        assert needle in first_screen, needle


def test_the_docs_point_at_nothing_outside_the_repository():
    for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        text = doc.read_text()
        for outside in ("../shared/spec", "spec/trace-replay.md", "spec/descheduler.md"):
            assert outside not in text, (doc.name, outside)


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--snapshot", str(SNAPSHOT), "--http_bind=127.0.0.1:99999"],
        ["serve", "--snapshot", str(SNAPSHOT), "--metrics-bind-address=:70000"],
        ["descheduler", "--snapshot", str(SNAPSHOT), "--http_bind=127.0.0.1:65536"],
    ],
)
def test_a_port_out_of_range_is_one_line_and_exit_2(argv):
    proc = hami_fast(*argv)
    assert proc.returncode == 2
    message = one_line(proc)
    assert "is out of range (0-65535)" in message and "Traceback" not in proc.stderr, message


def test_a_negative_gpu_count_names_the_field(tmp_path):
    pod = tmp_path / "pod.yaml"
    pod.write_text((ROOT / "examples" / "pod.yaml").read_text().replace("nvidia.com/gpu: 1", "nvidia.com/gpu: -1"))
    proc = hami_fast("explain", "--snapshot", str(ROOT / "examples" / "snapshot.yaml"), "--pod", str(pod))
    assert proc.returncode == 2
    assert "nvidia.com/gpu" in proc.stderr and "negative" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("flag", "value", "want"),
    [
        ("--kube-qps", "-1", "want a number of at least 0, got '-1'"),
        ("--kube-qps", "abc", "want a number of at least 0, got 'abc'"),
        ("--kube-burst", "1.5", "want a whole number of at least 0, got '1.5'"),
        ("--default-mem", "-3", "want a number of at least 0, got '-3'"),
        ("--bind-workers", "-4", "want a number of at least 0, got '-4'"),
    ],
)
def test_a_negative_or_unreadable_number_option_is_one_line(flag, value, want):
    proc = hami_fast("serve", f"{flag}={value}", timeout=20)
    assert proc.returncode == 2
    assert one_line(proc) == f"hami-fast serve: option {flag}: {want}"


def test_a_negative_number_from_the_environment_is_refused_too(tmp_path):
    proc = hami_fast("serve", env={**no_cluster_env(tmp_path), "HAMI_FAST_KUBE_QPS": "-2"}, timeout=20)
    assert proc.returncode == 2
    assert one_line(proc) == "hami-fast serve: option --kube-qps: want a number of at least 0, got '-2'"


def test_an_empty_snapshot_is_one_line_not_an_empty_plan(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("\n")
    proc = hami_fast("plan", "--snapshot", str(empty))
    assert proc.returncode == 2
    assert one_line(proc) == (
        f"hami-fast plan: {empty}: empty; a snapshot is a List of Nodes and Pods (kubectl get nodes,pods -A -o json)"
    )


def dcu_snapshot(tmp_path: Path, owner: str = "") -> tuple[Path, Path]:
    """Two Hygon DCU nodes, each card a third full (its pods bare, else of ReplicaSet `owner`), and
    a pod asking two whole cards."""
    items: list[dict] = []
    for n in range(2):
        node = f"dcu-{n}"
        register = "".join(f"DCU-{node}-{i},4,65536,100,DCU-Z100L,0,true,{i},hami-core:" for i in range(2))
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node, "annotations": {"hami.io/node-dcu-register": register}},
            }
        )
        for i in range(2):
            allocated = f"DCU-{node}-{i},DCU,16000,30:;"
            annotations = {"hami.io/vgpu-node": node, "hami.io/dcu-devices-allocated": allocated}
            meta = {"name": f"r-{node}-{i}", "namespace": "default", "uid": f"u-{node}-{i}", "annotations": annotations}
            if owner:
                meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "controller": True}]
            share = {"hygon.com/dcunum": "1", "hygon.com/dcumem": "16000", "hygon.com/dcucores": "30"}
            spec = {"nodeName": node, "containers": [{"name": "c", "image": "x", "resources": {"limits": share}}]}
            items.append(
                {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}
            )
    snapshot, pod = tmp_path / "snap.json", tmp_path / "pod.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    limits = {"hygon.com/dcunum": "2", "hygon.com/dcucores": "100"}
    container = {"name": "c", "image": "x", "resources": {"limits": limits}}
    pod.write_text(json.dumps({"kind": "Pod", "metadata": {"name": "big"}, "spec": {"containers": [container]}}))
    return snapshot, pod


def test_plan_for_a_vendor_pod_moves_the_vendor_pods_in_its_way(tmp_path):
    snapshot, pod = dcu_snapshot(tmp_path, owner="rs")
    proc = hami_fast("plan", "--snapshot", str(snapshot), "--for", str(pod), "--output", "json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["unblocked"] and len(plan["moves"]) == 2
    target = plan["target"]["node"]
    other = "dcu-1" if target == "dcu-0" else "dcu-0"
    assert sorted(plan["target"]["gpus"]) == [f"DCU-{target}-0", f"DCU-{target}-1"]
    for move in plan["moves"]:
        assert move["from"]["node"] == target and move["to"]["node"] == other
        assert move["to"]["gpus"][0].startswith(f"DCU-{other}-")
    assert plan["reservation"] == {"pod": "default/big", "uid": "", "node": target, "gpus": plan["target"]["gpus"]}


def test_plan_for_a_vendor_pod_names_the_bare_pods_in_its_way(tmp_path):
    snapshot, pod = dcu_snapshot(tmp_path)
    proc = hami_fast("plan", "--snapshot", str(snapshot), "--for", str(pod))
    assert proc.returncode == 1
    assert "pod default/big cannot be unblocked within 10 moves" in proc.stdout
    assert "GPU DCU-dcu-0-0 holds default/r-dcu-0-0 which may not move (bare pod" in proc.stdout


def test_explain_of_a_vendor_pod_that_fits_nowhere_points_at_the_node_reasons(tmp_path):
    snapshot, pod = dcu_snapshot(tmp_path)
    proc = hami_fast("explain", "--snapshot", str(snapshot), "--pod", str(pod))
    assert "CardInsufficientMemory" in proc.stdout and "dcu-0" in proc.stdout
    assert proc.stdout.rstrip().endswith(
        "what would have to change: see each node's reason above (the cluster-wide advice covers NVIDIA vGPU requests)"
    )

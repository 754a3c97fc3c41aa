"""End-to-end: `kubectl hami why/top/plan` against the real kube-apiserver, and the chart installing
the image `make image` builds (the scheduler Deployment's pod spec names it)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from controlplane import CHART, find_helm, wait_for
from test_e2e_control_plane import NS, gpu_pod, make_node, pods_path

ROOT = Path(__file__).resolve().parents[2]
KUBECTL_HAMI = str(Path(sys.executable).parent / "kubectl-hami")


@pytest.fixture(scope="module")
def kubeconfig(cluster):
    cluster.api.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, exist_ok=True
    )
    make_node(cluster.api, "kh-1", gpus=2)
    make_node(cluster.api, "kh-2", gpus=1, memory=8000)
    return str(cluster.cp.kubeconfig("kubectl-hami", cluster.cp.admin_token))


def kubectl_hami(kubeconfig: str, *argv: str) -> str:
    proc = subprocess.run(
        [KUBECTL_HAMI, "--kubeconfig", kubeconfig, *argv], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_why_explains_a_pending_pod_on_the_real_control_plane(cluster, kubeconfig):
    cluster.api.create(pods_path(), gpu_pod("kh-too-big", gpu=1, mem=30000, cores=10))
    try:

        def unschedulable():
            pod = cluster.api.get(pods_path("kh-too-big"))
            return any(c.get("reason") == "Unschedulable" for c in pod.get("status", {}).get("conditions", []))

        wait_for("kube-scheduler to mark kh-too-big Unschedulable", unschedulable, timeout=60)
        out = kubectl_hami(kubeconfig, "why", "kh-too-big", "-n", NS)
        assert out.startswith(f"pod {NS}/kh-too-big: Pending, scheduler hami-scheduler")
        assert re.search(r"^kube-scheduler: 0/\d+ nodes are available", out, re.M)
        assert "chosen node: none" in out and "CardInsufficientMemory" in out
        # Every GPU of the cluster is 16384 MiB: no amount of waiting or moving makes room.
        assert re.search(
            r"needs 30000 MiB on one GPU; no GPU in the cluster is that large: the largest has 16384 MiB \(\S+/GPU-",
            out,
        )
        result = json.loads(kubectl_hami(kubeconfig, "why", "kh-too-big", "-n", NS, "-o", "json"))
        assert result["node"] is None and result["failed"]["kh-2"] == "1/1 CardInsufficientMemory"
    finally:
        cluster.api.delete(pods_path("kh-too-big"))


def test_top_and_plan_read_the_real_cluster(cluster, kubeconfig):
    nodes = kubectl_hami(kubeconfig, "top", "nodes", "--sort", "name")
    rows = {line.split()[0]: line.split() for line in nodes.splitlines()[1:]}
    assert rows["kh-1"][1:3] == ["2", "0/32768"] and rows["kh-2"][1:3] == ["1", "0/8000"]
    gpus = kubectl_hami(kubeconfig, "top", "gpus", "--sort", "name")
    assert {"GPU-kh-1-0", "GPU-kh-1-1", "GPU-kh-2-0"} <= {line.split()[1] for line in gpus.splitlines()[1:]}
    plan = json.loads(kubectl_hami(kubeconfig, "plan", "-o", "json"))
    assert plan["nodes"] >= 2 and plan["planner"] == "drain"
    assert all(m["from"]["node"] != m["to"]["node"] or m["from"]["gpus"] != m["to"]["gpus"] for m in plan["moves"])


def test_the_chart_installs_the_image_make_image_builds(cluster, kubeconfig):
    version = re.search(r'^version = "(.+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)
    image = f"localhost/hami-fast:v{version}"
    archive = os.environ.get("HAMI_FAST_IMAGE")
    if archive:  # .ci/run builds the image before the e2e suite: it must be the one the chart names
        with tarfile.open(archive) as tar:
            index = json.load(tar.extractfile("index.json"))
        assert image in [m.get("annotations", {}).get("org.opencontainers.image.ref.name") for m in index["manifests"]]
    base = [find_helm(), "--kubeconfig", kubeconfig, "--namespace", "image-test"]
    proc = subprocess.run(
        [*base, "install", "img", str(CHART), "--create-namespace", "--no-hooks", "--wait=false"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        assert proc.returncode == 0, proc.stderr
        dep = cluster.api.get("/apis/apps/v1/namespaces/image-test/deployments/img-hami-fast-scheduler")
        images = {c["name"]: c["image"] for c in dep["spec"]["template"]["spec"]["containers"]}
        assert images["vgpu-scheduler-extender"] == image
    finally:
        subprocess.run([*base, "uninstall", "img", "--no-hooks"], capture_output=True, text=True, timeout=120)

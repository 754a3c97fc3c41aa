"""`hami-fast explain` and `kubectl hami why` say when a pending pod would be unblocked by evicting
lower-priority pods, and which, or why preemption would not help."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hami_fast import annotations as keys
from hami_fast.cli import main as hami_fast_main
from hami_fast.kubectl import main as kubectl_main
from k8s_objects import gpu_node, gpu_pod

MEM = 16384


def running(name: str, priority: int, gpu: int) -> dict[str, Any]:
    pod = gpu_pod(name, gpu=1, mem=MEM)
    pod["metadata"]["annotations"] = {keys.VGPU_NODE: "node-0", keys.ALLOCATED: f"GPU-node-0-{gpu},NVIDIA,{MEM},0:;"}
    pod["spec"].update(nodeName="node-0", priority=priority)
    pod["status"] = {"phase": "Running"}
    return pod


def pending(name: str, priority: int, policy: str | None = None) -> dict[str, Any]:
    pod = gpu_pod(name, gpu=1, mem=MEM)
    pod["spec"]["priority"] = priority
    if policy:
        pod["spec"]["preemptionPolicy"] = policy
    pod["status"] = {"phase": "Pending"}
    return pod


CLUSTER = [gpu_node("node-0", gpus=2, memory=MEM), running("low", 10, 0), running("mid", 50, 1)]


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": CLUSTER}))
    return path


def explain(tmp_path: Path, snapshot: Path, pod: dict[str, Any], capsys, *flags: str) -> str:
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(pod))
    assert hami_fast_main(["explain", "--snapshot", str(snapshot), "--pod", str(path), *flags]) == 1
    return capsys.readouterr().out


def test_explain_names_the_victims_that_would_unblock_the_pod(tmp_path, snapshot, capsys) -> None:
    out = explain(tmp_path, snapshot, pending("urgent", 100), capsys)
    assert (
        "preemption (priority 100): would unblock it on node-0 (GPU-node-0-0) by evicting 1 lower-priority pod:" in out
    )
    assert "  default/low (priority 10)" in out and "default/mid" not in out.split("preemption")[1]
    result = json.loads(explain(tmp_path, snapshot, pending("urgent", 100), capsys, "--output", "json"))
    assert result["preemption"]["victims"] == [
        {"key": "uid-default-low", "namespace": "default", "name": "low", "priority": 10}
    ]


@pytest.mark.parametrize(
    ("priority", "policy", "why"),
    [
        (10, None, "no pod of lower priority holds GPUs"),
        (100, "Never", "its preemptionPolicy is Never"),
    ],
)
def test_explain_says_why_preemption_would_not_help(tmp_path, snapshot, capsys, priority, policy, why) -> None:
    out = explain(tmp_path, snapshot, pending("waiting", priority, policy), capsys)
    assert f"preemption (priority {priority}): would not unblock it: {why}" in out


def test_kubectl_hami_why_names_the_victims(kubeapi, capsys) -> None:
    for obj in CLUSTER:
        kubeapi.create(obj)
    kubeapi.create(pending("urgent", 60))
    assert kubectl_main(["--kubeconfig", kubeapi.kubeconfig, "why", "urgent"]) == 0
    out = capsys.readouterr().out
    assert (
        "preemption (priority 60): would unblock it on node-0 (GPU-node-0-0) by evicting 1 lower-priority pod:" in out
    )
    assert "  default/low (priority 10)" in out

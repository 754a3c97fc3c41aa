"""`hami-fast explain` end to end through the CLI entry point, on snapshot files as kubectl prints them."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
import yaml
from hami_fast.cli import main

V100 = "NVIDIA-Tesla V100-PCIE-32GB"


def register(prefix: str) -> str:
    devices = [
        {
            "id": f"GPU-{prefix}0",
            "count": 10,
            "devmem": 32768,
            "devcore": 100,
            "type": V100,
            "mode": "hami-core",
            "health": True,
        },
        {
            "id": f"GPU-{prefix}1",
            "index": 1,
            "count": 10,
            "devmem": 32768,
            "devcore": 100,
            "type": V100,
            "mode": "hami-core",
            "health": True,
        },
    ]
    return orjson.dumps(devices).decode()


def cluster_objects() -> list[dict]:
    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": n, "annotations": {"hami.io/node-nvidia-register": register(n[-1])}},
        }
        for n in ("node-a", "node-b")
    ]
    nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-only"}})
    running = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "old",
            "namespace": "default",
            "uid": "u-old",
            "annotations": {"hami.io/vgpu-node": "node-a", "hami.io/vgpu-devices-allocated": "GPU-a0,NVIDIA,3000,30:;"},
        },
        "spec": {"containers": [{"name": "c"}], "nodeName": "node-a"},
        "status": {"phase": "Running"},
    }
    return [*nodes, running]


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "new", "namespace": "default"},
    "spec": {
        "containers": [
            {
                "name": "c",
                "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000, "nvidia.com/gpucores": 20}},
            }
        ]
    },
}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": cluster_objects()}))
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(POD))
    return snapshot, pod


def run_json(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> dict:
    """explain's JSON object; `status` the exit status (0 fits, 1 fits nowhere, 2 bad input)."""
    assert main(["explain", *argv, "--output", "json"]) == status
    return json.loads(capsys.readouterr().out)


def test_explain_json(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    snapshot, pod = files
    result = run_json(capsys, "--snapshot", str(snapshot), "--pod", str(pod))
    assert result["node"] == "node-a"
    assert result["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-a1,NVIDIA,4000,20:;"
    assert result["annotations"]["hami.io/vgpu-node"] == "node-a"
    assert set(result["annotations"]) == {
        "hami.io/vgpu-node",
        "hami.io/vgpu-time",
        "hami.io/vgpu-devices-to-allocate",
        "hami.io/vgpu-devices-allocated",
    }
    assert result["failed"] == {"cpu-only": "node unregistered"}
    assert result["scores"] == {"node-a": pytest.approx(2.4578, abs=1e-3), "node-b": 0.0}
    assert result["error"] == ""


def test_explain_policies_and_multidoc_yaml(
    tmp_path: Path, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, pod = files
    multidoc = tmp_path / "multi.yaml"
    multidoc.write_text(yaml.safe_dump_all(cluster_objects()))
    result = run_json(
        capsys,
        "--snapshot",
        str(multidoc),
        "--pod",
        str(pod),
        "--node-scheduler-policy",
        "spread",
        "--gpu-scheduler-policy",
        "binpack",
    )
    assert result["node"] == "node-b"
    assert result["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-b1,NVIDIA,4000,20:;"


def test_explain_applies_webhook_defaults(
    tmp_path: Path, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot, _ = files
    whole = tmp_path / "whole.json"
    whole.write_text(
        json.dumps(
            {
                "kind": "Pod",
                "metadata": {"name": "w", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            }
        )
    )
    result = run_json(capsys, "--snapshot", str(snapshot), "--pod", str(whole))
    assert result["node"] == "node-a"
    assert result["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-a1,NVIDIA,32768,100:;"


def test_explain_text_marks_the_choice(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    snapshot, pod = files
    assert main(["explain", "--snapshot", str(snapshot), "--pod", str(pod)]) == 0
    out = capsys.readouterr().out
    assert "chosen node: node-a" in out
    assert "node unregistered" in out
    assert "<- chosen" in [line for line in out.splitlines() if line.strip().startswith("node-a")][0]


def test_explain_reports_unfit_pod(
    tmp_path: Path, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot, _ = files
    big = tmp_path / "big.yaml"
    big.write_text(
        yaml.safe_dump(
            {
                "kind": "Pod",
                "metadata": {"name": "b", "namespace": "default"},
                "spec": {
                    "containers": [
                        {"name": "c", "resources": {"limits": {"nvidia.com/gpu": 3, "nvidia.com/gpumem": 100}}}
                    ]
                },
            }
        )
    )
    result = run_json(capsys, "--snapshot", str(snapshot), "--pod", str(big), status=1)
    assert result["node"] is None
    assert result["failed"] == {
        "node-a": "NodeInsufficientDevice",
        "node-b": "NodeInsufficientDevice",
        "cpu-only": "node unregistered",
    }


def test_bad_files_give_clear_errors(
    tmp_path: Path, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot, pod = files
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [unclosed")
    assert main(["explain", "--snapshot", str(broken), "--pod", str(pod)]) == 2
    assert "broken.yaml" in capsys.readouterr().err
    assert main(["explain", "--snapshot", str(tmp_path / "missing.yaml"), "--pod", str(pod)]) == 2
    assert "missing.yaml" in capsys.readouterr().err
    assert main(["explain", "--snapshot", str(snapshot), "--pod", str(snapshot)]) == 2
    assert "expected one Pod" in capsys.readouterr().err
    bad_ann = tmp_path / "bad.yaml"
    objects = cluster_objects()
    objects[-1]["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = "GPU-a0,NVIDIA,lots,1:;"
    bad_ann.write_text(yaml.safe_dump_all(objects))
    # As HAMi (and the watch path) do, the malformed resident pod is skipped, with one warning line.
    assert main(["explain", "--snapshot", str(bad_ann), "--pod", str(pod)]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("warning: ") and err.count("\n") == 1
    assert "skipped Pod default/old" in err and "hami.io/vgpu-devices-allocated" in err
    assert "chosen node: node-a" in out


def test_pod_without_vgpu_is_explained_as_such(
    tmp_path: Path, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot, _ = files
    plain = tmp_path / "plain.yaml"
    plain.write_text(
        yaml.safe_dump(
            {"kind": "Pod", "metadata": {"name": "p", "namespace": "x"}, "spec": {"containers": [{"name": "c"}]}}
        )
    )
    assert main(["explain", "--snapshot", str(snapshot), "--pod", str(plain), "--output", "json"]) == 2
    assert "requests no vGPU" in json.loads(capsys.readouterr().out)["error"]
    assert main(["explain", "--snapshot", str(snapshot), "--pod", str(plain)]) == 2
    assert capsys.readouterr().err == (
        "hami-fast explain: Pod x/p: requests no vGPU resource; kube-scheduler places it without hami-fast\n"
    )

"""HAMi's device config file on every command: read as HAMi reads it, one clear line when it is wrong.

The engine's own checks (YAML 1.1 decoding, unknown keys, duplicate common words, ...) have their
Rust tests in rust/hami-core/src/device_config/tests.rs; these tests cover the commands around it.
HAMi's decisions under varied configs are compared in test_hami_oracle_config.py.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import orjson
import pytest
from hami_fast import config as serve_config
from hami_fast import device_config
from hami_fast.cli import main as hami_fast_main
from hami_fast.kubectl import main as kubectl_main

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "examples" / "snapshot.yaml"

RENAMED = """
nvidia:
  resourceCountName: example.com/vgpu
  resourceMemoryName: example.com/vgpu-memory
  resourceCoreName: example.com/vgpu-cores
  memoryFactor: 2
  defaultGPUNum: 1
  runtimeClassName: nvidia
"""


def pod_file(tmp_path: Path, limits: dict[str, str]) -> Path:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]},
    }
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(pod))
    return path


def explain_json(capsys, tmp_path: Path, limits: dict[str, str], *flags: str) -> tuple[int, dict, str]:
    pod = pod_file(tmp_path, limits)
    code = hami_fast_main(["explain", "--snapshot", str(SNAPSHOT), "--pod", str(pod), "--output", "json", *flags])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else {}), err


@pytest.fixture
def renamed(tmp_path: Path) -> Path:
    path = tmp_path / "device-config.yaml"
    path.write_text(RENAMED)
    return path


def test_explain_schedules_the_resources_the_file_names(capsys, tmp_path, renamed):
    limits = {"example.com/vgpu": "1", "example.com/vgpu-memory": "3000"}
    code, out, err = explain_json(capsys, tmp_path, limits, "--device-config-file", str(renamed))
    assert out["node"], err
    allocated = out["annotations"]["hami.io/vgpu-devices-allocated"]
    assert ",6000," in allocated, f"memoryFactor 2 doubles the 3000 asked: {allocated}"
    code, out, err = explain_json(capsys, tmp_path, limits)
    assert out["node"] is None and "hami.io/vgpu-devices-allocated" not in out.get("annotations", {}), out


def test_the_old_resource_name_asks_for_nothing_under_a_renamed_config(capsys, tmp_path, renamed):
    code, out, _ = explain_json(capsys, tmp_path, {"nvidia.com/gpu": "1"}, "--device-config-file", str(renamed))
    assert "hami.io/vgpu-devices-allocated" not in out.get("annotations", {}), out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nvidia:\n  memoryFactor: abc\n", "nvidia.memoryFactor"),
        ("nvidia: [unclosed\n", "line 2 column 1"),
        ("iluvatars:\n- commonWord: X\n- commonWord: X\n", 'iluvatars[1].commonWord: "X" is already the common word'),
        ("", "all configurations are empty"),
        ("nvidia:\n  gpuCorePolicy: sometimes\n", "nvidia.gpuCorePolicy"),
    ],
)
def test_a_bad_file_is_one_line_naming_file_and_field_exit_2(capsys, tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    for argv in (
        [
            "explain",
            "--snapshot",
            str(SNAPSHOT),
            "--pod",
            str(pod_file(tmp_path, {})),
            "--device-config-file",
            str(path),
        ],
        ["serve", "--demo", "--device-config-file", str(path), "--metrics-bind-address", ""],
        ["plan", "--snapshot", str(SNAPSHOT), "--device-config-file", str(path)],
    ):
        assert hami_fast_main(argv) == 2, argv
        _, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and expected in lines[0], (argv, err)


def test_a_missing_file_is_named(capsys, tmp_path):
    missing = tmp_path / "nope.yaml"
    argv = ["explain", "--snapshot", str(SNAPSHOT), "--pod", str(pod_file(tmp_path, {}))]
    assert hami_fast_main([*argv, "--device-config-file", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"device config file {missing}: No such file" in err, err


def test_serve_config_takes_the_file_and_names_the_flags_it_replaces(renamed, caplog):
    parser = argparse.ArgumentParser()
    serve_config.add_arguments(parser)
    args = parser.parse_args(["--device-config-file", str(renamed), "--resource-name", "x.io/gpu", "--enable-ascend"])
    cfg = serve_config.load(args, environ={})
    engine = orjson.loads(cfg.engine_config())
    assert engine["device_config"]["nvidia"]["resourceCountName"] == "example.com/vgpu"
    assert engine["vendors"] == {"enable_ascend": True, "enable_iluvatar": False}
    assert "replaces --resource-name" in caplog.text
    env = serve_config.load(parser.parse_args([]), environ={"HAMI_FAST_DEVICE_CONFIG_FILE": str(renamed)})
    assert env.devices.config is not None and env.devices.config["nvidia"]["memoryFactor"] == 2


def test_the_descheduler_and_planner_take_the_flags(tmp_path, renamed, capsys):
    code = hami_fast_main(
        ["plan", "--snapshot", str(SNAPSHOT), "--device-config-file", str(renamed), "--output", "json"]
    )
    assert code == 0
    assert "moves" in json.loads(capsys.readouterr().out)
    from hami_fast.descheduler.cli import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--device-config-file", str(renamed), "--enable-iluvatar=true"])
    settings = device_config.from_args(args)
    assert settings.enable_iluvatar and settings.config["nvidia"]["resourceCountName"] == "example.com/vgpu"


def test_kubectl_hami_reads_the_config_map_from_the_cluster(kubeapi, capsys):
    from hami_fast.manifests import load_objects

    for obj in load_objects(SNAPSHOT):
        kubeapi.create(obj)
    kubeapi.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "hami-scheduler-device", "namespace": "kube-system"},
            "data": {"device-config.yaml": RENAMED},
        }
    )
    kubeapi.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "renamed", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"example.com/vgpu": "1"}}}]},
        }
    )
    base = ["--kubeconfig", kubeapi.kubeconfig]
    code = kubectl_main(
        [*base, "--device-config-map", "kube-system/hami-scheduler-device", "why", "renamed", "-o", "json"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["node"], out
    code = kubectl_main([*base, "why", "renamed", "-o", "json"])
    assert json.loads(capsys.readouterr().out)["node"] is None, "the chart default does not know example.com/vgpu"
    assert kubectl_main([*base, "--device-config-map", "kube-system/absent", "why", "renamed"]) == 2
    assert 'configmap "absent" not found in namespace "kube-system"' in capsys.readouterr().err


# Each backend of the chart's config (Ascend and Iluvatar are not on by default), by its count resource.
CHART_BACKENDS = {
    "amd.com/gpu": "AMD",
    "aws.amazon.com/neuron": "AWSNeuron",
    "birentech.com/gpu": "Biren",
    "cambricon.com/vmlu": "MLU",
    "enflame.com/gcu": "GCU",
    "enflame.com/drs-gcu": "Enflame",
    "hygon.com/dcunum": "DCU",
    "kunlunxin.com/xpu": "kunlun",
    "kunlunxin.com/vxpu": "XPU",
    "metax-tech.com/gpu": "Metax-GPU",
    "metax-tech.com/sgpu": "Metax-SGPU",
    "mthreads.com/vgpu": "Mthreads",
    "vastaitech.com/va": "Vastai",
}
# Scheduled by hami-fast (the vendor suite compares them with HAMi); any other is placed or refused by name.
PLACED = {"AMD", "Biren", "MLU", "GCU", "DCU", "kunlun", "XPU", "Metax-GPU", "Metax-SGPU", "Mthreads", "Vastai"}


@pytest.mark.parametrize("resource", sorted(CHART_BACKENDS))
def test_every_backend_of_hami_is_routed_here_and_placed_or_refused_by_name(resource):
    """Every backend HAMi's chart config sets up: the webhook sets the scheduler name as HAMi's
    does; Filter places the pod (here on no node: an empty candidate list, not an error), or, for a
    backend hami-fast does not place yet, refuses it naming the resource and HAMi's backend instead
    of letting the default scheduler bind it without its devices."""
    import base64

    from hami_fast import _native

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {resource: "1"}}}]},
    }
    cluster = _native.Cluster()
    review = {"request": {"uid": "r", "namespace": "default", "object": pod}}
    response = orjson.loads(cluster.admit(orjson.dumps(review)))["response"]
    ops = json.loads(base64.b64decode(response["patch"]))
    assert any(op["path"] == "/spec/schedulerName" and op["value"] == "hami-scheduler" for op in ops), ops
    decision = cluster.decide(orjson.dumps({"Pod": pod, "NodeNames": ["node-1"]}), 0)
    error = orjson.loads(decision.response).get("Error") or ""
    word = CHART_BACKENDS[resource]
    refusal = f"asks for {resource} (HAMi's {word} backend), which hami-fast does not schedule yet"
    if word in PLACED:
        assert "does not schedule yet" not in error, error
    else:  # not placed yet, or placed by a branch that has not listed it here: nothing else
        assert error == "" or refusal in error, error


def test_a_config_without_a_section_sets_up_no_backend(capsys, tmp_path):
    path = tmp_path / "no-metax.yaml"
    path.write_text("nvidia:\n  resourceCountName: nvidia.com/gpu\n")
    _, out, _ = explain_json(capsys, tmp_path, {"metax-tech.com/sgpu": "1"}, "--device-config-file", str(path))
    assert out["node"] is None and "Metax-SGPU" not in out.get("error", ""), out


def test_a_dcu_pod_is_placed_on_dcu_devices_with_hygon_s_annotations(tmp_path):
    """Hygon DCU, registered in HAMi's colon/comma format: a resident pod's DCU usage counts, the
    pod lands on the free cards, and the allocation is written under Hygon's keys only."""
    from hami_fast import _native

    register = ":".join(f"DCU-{i},4,65536,100,DCU-Z100L,0,true" for i in range(3)) + ":"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "dcu-0", "annotations": {"hami.io/node-dcu-register": register}},
        "status": {"allocatable": {"hygon.com/dcunum": "12"}},
    }
    resident = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "r",
            "namespace": "default",
            "uid": "r1",
            "annotations": {"hami.io/vgpu-node": "dcu-0", "hami.io/dcu-devices-allocated": "DCU-2,DCU,60000,100:;"},
        },
        "spec": {"nodeName": "dcu-0", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running"},
    }
    cluster = _native.Cluster()
    cluster.apply_list_page(orjson.dumps({"kind": "List", "items": [node, resident]}))
    limits = {"hygon.com/dcunum": "2", "hygon.com/dcumem": "10000", "hygon.com/dcucores": "50"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]},
    }
    out = orjson.loads(cluster.explain(orjson.dumps(pod), 0, None, None))
    assert out["node"] == "dcu-0", out
    allocated = out["annotations"]["hami.io/dcu-devices-allocated"]
    assert allocated == "DCU-1,DCU,10000,50:DCU-0,DCU,10000,50:;", allocated
    assert "hami.io/vgpu-devices-allocated" not in out["annotations"], "no NVIDIA key for a DCU-only pod"
    limits["hygon.com/dcunum"] = "3"
    out = orjson.loads(cluster.explain(orjson.dumps(pod), 0, None, None))
    assert out["failed"]["dcu-0"] == "1/3 CardInsufficientMemory, 2/3 AllocatedCardsInsufficientRequest", out


def test_quota_is_kept_per_backend(tmp_path):
    """A namespace's DCU usage counts against its DCU quota only: an NVIDIA pod is admitted under
    an NVIDIA quota a DCU pod's memory would exceed, and a DCU pod is denied past the DCU quota."""
    from hami_fast import _native

    resident = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "r",
            "namespace": "team",
            "uid": "r1",
            "annotations": {"hami.io/vgpu-node": "n", "hami.io/dcu-devices-allocated": "DCU-0,DCU,20000,50:;"},
        },
        "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running"},
    }
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "team"},
        "spec": {"hard": {"limits.nvidia.com/gpumem": "10000", "limits.hygon.com/dcumem": "30000"}},
    }
    cluster = _native.Cluster()
    cluster.apply_list_page(orjson.dumps({"kind": "List", "items": [resident, quota]}))

    def admitted(limits: dict[str, str]) -> bool:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "team", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]},
        }
        review = {"request": {"uid": "r", "namespace": "team", "object": pod}}
        response = orjson.loads(cluster.admit(orjson.dumps(review)))["response"]
        return response["allowed"]

    assert admitted({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "5000"})
    assert admitted({"hygon.com/dcunum": "1", "hygon.com/dcumem": "10000"})
    assert not admitted({"hygon.com/dcunum": "1", "hygon.com/dcumem": "10001"})
    assert not admitted({"hygon.com/dcunum": "2", "hygon.com/dcumem": "6000"}), "per card, times the count"

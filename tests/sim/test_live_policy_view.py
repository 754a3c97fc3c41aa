"""What the simulator-derived node policies read live besides GPU usage: each node's allocatable CPU
and the CPU its pods request (from the same Node and Pod objects the scheduler watches), the pods
placed so far, and FGD's target workload when the configuration gives it. The decision-by-decision
check against the trace replay is `rust/hami-core/tests/live_equals_replay.rs`."""

from __future__ import annotations

import json

import orjson
import pytest
from hami_fast import _native
from hami_fast.config import Config
from k8s_objects import registered_node


def _node(name: str, gpus: int, cores: int) -> bytes:
    node = registered_node(name, gpus, 32768, "NVIDIA-G2")
    node["status"] = {"allocatable": {"cpu": str(cores), "memory": "512Gi"}}
    return orjson.dumps(node)


def _pod(name: str, cores: int, node: str = "") -> bytes:
    spec: dict = {"containers": [{"name": "c", "resources": {
        "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "32768"},
        "requests": {"cpu": str(cores), "memory": "1Gi"}}}]}  # fmt: skip
    annotations = {}
    if node:
        spec["nodeName"] = node
        annotations = {"hami.io/vgpu-node": node, "hami.io/vgpu-devices-allocated": f"GPU-{node}-0,NVIDIA,32768,0:;"}
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations,
            "creationTimestamp": "2026-01-01T00:00:00Z"}  # fmt: skip
    return orjson.dumps(
        {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}
    )


def _cluster() -> _native.Cluster:
    """An 8-GPU node with 96 cores holding one whole-GPU pod of 12 cores (so the GPU pods seen ask
    12 cores per GPU), and an empty 2-GPU node with 104 cores."""
    c = _native.Cluster()
    c.apply(_node("a-dense", 8, 96))
    c.apply(_node("b-cpu-rich", 2, 104))
    c.apply(_pod("resident", 12, node="a-dense"))
    return c


@pytest.mark.parametrize(("cores", "node"), [(40, "b-cpu-rich"), (1, "a-dense")])
def test_fgd_balance_reads_the_nodes_cpu_live(cores: int, node: str) -> None:
    """A whole-GPU pod changes no fragment on either node (a tie for FGD's score). A CPU-heavy one
    (40 cores) goes where CPU is spare beyond what the free GPUs need (b: 104 − 40 − 12 > 0; a:
    96 − 12 − 40 − 6·12 < 0), a light one (1 core) uses up the GPUs of the CPU-poor node: the
    replay's tie-break, which needs the allocatable and the resident pod's request."""
    out = json.loads(_cluster().explain(_pod("new", cores), 7, node_policy="fgd-balance"))
    assert out["node"] == node, out["scores"]


def test_a_pod_that_ends_frees_its_cpu_for_the_policy() -> None:
    """With a 60-core pod on it, the 96-core node has too little CPU left for a 40-core pod by the
    policy's view (kube-scheduler would not pass it on); once that pod has ended, it has enough."""
    c = _native.Cluster()
    c.apply(_node("a-dense", 8, 96))
    c.apply(_node("b-cpu-rich", 2, 104))
    c.apply(_pod("resident", 60, node="a-dense"))
    before = json.loads(c.explain(_pod("new", 40), 7, node_policy="fgd-balance"))["scores"]
    done = orjson.loads(_pod("resident", 60, node="a-dense"))
    done["status"]["phase"] = "Succeeded"
    c.apply(orjson.dumps(done))
    after = json.loads(c.explain(_pod("new", 40), 7, node_policy="fgd-balance"))["scores"]
    assert before["a-dense"] < 0 < before["b-cpu-rich"], before
    assert after["a-dense"] >= 1, after


def test_fgd_target_workload_from_the_configuration(tmp_path) -> None:
    path = tmp_path / "workload.json"
    path.write_bytes(orjson.dumps([[12000, 1000, 1, "", 0.5], [8000, 500, 1, "G2", 0.5]]))
    engine_config = orjson.loads(Config(fgd_target_workload=str(path)).engine_config())
    assert engine_config["fgd_target_workload"] == [[12000, 1000, 1, "", 0.5], [8000, 500, 1, "G2", 0.5]]
    assert orjson.loads(Config().engine_config())["fgd_target_workload"] == []
    _native.Cluster(orjson.dumps(engine_config))  # the engine takes it
    with pytest.raises(_native.EngineError):
        _native.Cluster(orjson.dumps({"fgd_target_workload": [[1, 2]]}))

"""Golden Kubernetes objects (every optional field filled) read by the engine without loss or crash."""

from __future__ import annotations

import base64
import copy
import os
from pathlib import Path

import orjson
import pytest
from hami_fast._native import Cluster

SHARED = Path(os.environ.get("HAMI_FAST_SHARED") or Path(__file__).resolve().parents[2].parent / "shared")
FIXTURES = SHARED / "fixtures" / "k8s-api"
pytestmark = pytest.mark.skipif(
    not FIXTURES.is_dir(),
    reason=f"golden fixtures not found at {FIXTURES} (set HAMI_FAST_SHARED or put shared/ beside the repository)",
)


def golden(name: str) -> dict:
    return orjson.loads((FIXTURES / name).read_bytes())


def test_golden_node_and_pod_apply() -> None:
    cluster = Cluster()
    cluster.apply(orjson.dumps(golden("core.v1.Node.json")))
    cluster.apply(orjson.dumps(golden("core.v1.Pod.json")))
    usage = orjson.loads(cluster.usage())
    assert usage[0]["name"] == "nameValue"
    assert usage[0]["registered"] is False
    assert "hami.io/node-nvidia-register" in usage[0]["error"]
    assert cluster.pod_count() == 0


def test_golden_pod_with_vgpu_annotations_counts_on_its_node() -> None:
    cluster = Cluster()
    node = golden("core.v1.Node.json")
    node["metadata"]["annotations"]["hami.io/node-nvidia-register"] = orjson.dumps(
        [{"id": "GPU-1", "count": 10, "devmem": 1000, "devcore": 100, "type": "NVIDIA-T4", "health": True}]
    ).decode()
    cluster.apply(orjson.dumps(node))
    pod = golden("core.v1.Pod.json")
    pod["status"]["phase"] = "Running"
    pod["metadata"]["annotations"].update(
        {"hami.io/vgpu-node": "nameValue", "hami.io/vgpu-devices-allocated": "GPU-1,NVIDIA,10,5:;"}
    )
    cluster.apply(orjson.dumps(pod))
    device = orjson.loads(cluster.usage())[0]["devices"][0]
    assert (device["used"], device["usedmem"], device["usedcores"]) == (1, 10, 5)


def test_golden_pod_through_filter_is_passed_through() -> None:
    pod = golden("core.v1.Pod.json")
    decision = Cluster().decide(orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": ["a", "b"]}), 1)
    assert orjson.loads(decision.response) == {
        "Nodes": None,
        "NodeNames": ["a", "b"],
        "FailedNodes": None,
        "FailedAndUnresolvableNodes": None,
        "Error": "",
    }
    assert (decision.outcome, decision.node, decision.patch, decision.events) == ("passthrough", None, None, [])


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_golden_admission_review_is_answered_in_its_version(version: str) -> None:
    review = golden(f"admission.k8s.io.{version}.AdmissionReview.json")
    answer = orjson.loads(Cluster().admit(orjson.dumps(review)))
    assert answer["apiVersion"] == f"admission.k8s.io/{version}"
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == "uidValue"
    assert answer["response"]["allowed"] is False
    assert "CustomType" in answer["response"]["status"]["message"]


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_golden_review_carrying_a_vgpu_pod_is_mutated(version: str) -> None:
    review = golden(f"admission.k8s.io.{version}.AdmissionReview.json")
    pod = copy.deepcopy(golden("core.v1.Pod.json"))
    pod["spec"]["schedulerName"] = "default-scheduler"
    pod["spec"]["nodeName"] = ""
    for c in pod["spec"]["initContainers"] + pod["spec"]["containers"] + pod["spec"].get("ephemeralContainers", []):
        c.setdefault("securityContext", {})["privileged"] = False
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    review["request"]["object"] = pod
    answer = orjson.loads(Cluster().admit(orjson.dumps(review)))["response"]
    assert answer["allowed"] is True, answer
    ops = orjson.loads(base64.b64decode(answer["patch"]))
    assert {"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpucores", "value": "100"} in ops
    assert {"op": "replace", "path": "/spec/schedulerName", "value": "hami-scheduler"} in ops

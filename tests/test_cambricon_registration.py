"""Cambricon MLU registration as HAMi reads it (pkg/device/cambricon/device.go GetNodeDevices): one
device per 100 of the node's `mlu.smlu.vcore` capacity, the `mlu.smlu.vmemory` capacity shared out;
a core capacity that is no integer skips the node's MLUs with a warning naming node and field,
while its other backends still schedule."""

from __future__ import annotations

import orjson
from hami_fast import _native
from k8s_objects import gpu_node

VCORE = "cambricon.com/mlu.smlu.vcore"


def mlu_node(vcore: str) -> dict:
    node = gpu_node("mixed-0")
    node["status"]["capacity"] = {VCORE: vcore, "cambricon.com/mlu.smlu.vmemory": "96"}
    return node


def pod(limits: dict[str, str]) -> bytes:
    container = {"name": "c", "image": "x", "resources": {"limits": limits}}
    return orjson.dumps({"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {"containers": [container]}})


def explain(cluster: _native.Cluster, limits: dict[str, str]) -> dict:
    return orjson.loads(cluster.explain(pod(limits), 0, None, None))


def test_devices_are_cut_from_the_core_capacity() -> None:
    cluster = _native.Cluster()
    _, _, _, errors = cluster.apply_list_page(orjson.dumps({"kind": "List", "items": [mlu_node("250")]}))
    assert errors == []
    out = explain(cluster, {"cambricon.com/vmlu": "3", "cambricon.com/mlu.smlu.vmemory": "8"})
    assert out["node"] == "mixed-0", out
    allocated = out["annotations"]["hami.io/cambricon-mlu-devices-allocated"]
    # 3 devices for 250 cores; 96 x 256 MiB over 250 cores: 9830 MiB a device, 8 x 256 asked.
    assert sorted(allocated.rstrip(":;").split(":")) == [f"mixed-0-cambricon-mlu-{i},MLU,2048,100" for i in range(3)]
    assert out["annotations"]["CAMBRICON_DSMLU_PROFILE"].endswith("_100_8")
    too_many = explain(cluster, {"cambricon.com/vmlu": "4"})
    assert too_many["node"] is None and too_many["failed"]["mixed-0"] == "NodeInsufficientDevice"


def test_a_core_capacity_that_is_no_integer_skips_the_mlus_only() -> None:
    cluster = _native.Cluster()
    _, _, _, errors = cluster.apply_list_page(orjson.dumps({"kind": "List", "items": [mlu_node("1.5")]}))
    assert len(errors) == 1
    assert "Node mixed-0" in errors[0] and f"status.capacity[{VCORE}]" in errors[0], errors
    assert "MLU devices are skipped" in errors[0], errors
    mlu = explain(cluster, {"cambricon.com/vmlu": "1"})
    assert mlu["node"] is None and mlu["failed"]["mixed-0"] == "NodeInsufficientDevice", mlu
    gpu = explain(cluster, {"nvidia.com/gpu": "1"})
    assert gpu["node"] == "mixed-0", "the node's NVIDIA GPUs still schedule"

"""Backends whose devices HAMi cuts from the node's capacity of their core resource, as it reads
them: Cambricon MLU (pkg/device/cambricon/device.go GetNodeDevices: one device per 100 of
`mlu.smlu.vcore`, the `mlu.smlu.vmemory` capacity shared out) and Moore Threads
(pkg/device/mthreads/device.go: one per 16 of `sgpu-core`). A core capacity that is no integer
skips that backend's devices on the node with a warning naming node and field, while the node's
other backends still schedule."""

from __future__ import annotations

import orjson
import pytest
from hami_fast import _native
from k8s_objects import explained, gpu_node, limits_pod

VCORE = "cambricon.com/mlu.smlu.vcore"
MT_CORE = "mthreads.com/sgpu-core"


def mlu_node(vcore: str) -> dict:
    node = gpu_node("mixed-0")
    node["status"]["capacity"] = {VCORE: vcore, "cambricon.com/mlu.smlu.vmemory": "96"}
    return node


def mthreads_node(cores: str) -> dict:
    node = gpu_node("mixed-0")
    node["status"]["capacity"] = {MT_CORE: cores, "mthreads.com/sgpu-memory": "192"}
    return node


def pod(limits: dict[str, str]) -> bytes:
    return orjson.dumps(limits_pod(limits, uid="u"))


def explain(cluster: _native.Cluster, limits: dict[str, str]) -> dict:
    return explained(cluster, pod(limits), 0, None, None)


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


BAD = [
    pytest.param(mlu_node("1.5"), VCORE, "MLU", {"cambricon.com/vmlu": "1"}, id="cambricon"),
    pytest.param(mthreads_node("16x"), MT_CORE, "Mthreads", {"mthreads.com/vgpu": "1"}, id="mthreads"),
]


@pytest.mark.parametrize(("node", "field", "word", "limits"), BAD)
def test_a_core_capacity_that_is_no_integer_skips_that_backend_only(node, field, word, limits) -> None:
    cluster = _native.Cluster()
    _, _, _, errors = cluster.apply_list_page(orjson.dumps({"kind": "List", "items": [node]}))
    assert len(errors) == 1
    assert "Node mixed-0" in errors[0] and f"status.capacity[{field}]" in errors[0], errors
    assert f"{word} devices are skipped" in errors[0], errors
    refused = explain(cluster, limits)
    assert refused["node"] is None and refused["failed"]["mixed-0"] == "NodeInsufficientDevice", refused
    gpu = explain(cluster, {"nvidia.com/gpu": "1"})
    assert gpu["node"] == "mixed-0", "the node's NVIDIA GPUs still schedule"


def test_moore_threads_cards_and_their_annotations() -> None:
    cluster = _native.Cluster()
    _, _, _, errors = cluster.apply_list_page(orjson.dumps({"kind": "List", "items": [mthreads_node("32")]}))
    assert errors == []
    out = explain(cluster, {"mthreads.com/vgpu": "2"})
    assert out["node"] == "mixed-0", out
    ann = out["annotations"]
    # The webhook made it two whole cards, 16 cores and 96 x 512 MiB each: the node's two cards.
    assert "hami.io/mthreads-vgpu-devices-to-allocate" not in ann, "HAMi writes the -allocated list only"
    allocated = ann["hami.io/mthreads-vgpu-devices-allocated"]
    assert allocated.endswith(":;") and allocated.count("mixed-0-mthreads-") == 2, allocated
    assert ann["mthreads.com/predicate-node"] == "mixed-0"
    assert allocated.count(",Mthreads,49152,16:") == 2, allocated
    assert sorted(ann["mthreads.com/gpu-index"].split(",")) == ["0", "1"]
    assert explain(cluster, {"mthreads.com/vgpu": "3"})["failed"]["mixed-0"] == "NodeInsufficientDevice"

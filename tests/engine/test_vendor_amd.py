"""AMD as HAMi v2.10 schedules it, through the engine's Python binding: JSON registration kept while
the node's capacity is above 0, memory 0 = the whole card, core percentages as compute units, the
card's own model in the allocation, the webhook's 500 for a core limit outside 1..100, and a bad
register annotation skipped with a line naming node and annotation while the node's other
backends still schedule. HAMi's own answers are compared in test_hami_oracle_vendors.py."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hami_fast import _native
from k8s_objects import explained, limits_pod, node_with

AMD_REGISTER = "hami.io/node-amd-register"


def amd_devices(n: int, model: str = "AMD-Instinct-MI210", cus: int = 104) -> str:
    devices = [
        {"id": f"amd-{i}", "index": i, "count": 4, "devmem": 65536, "devcore": cus, "type": model, "health": True}
        for i in range(n)
    ]
    return json.dumps(devices)


def node(name: str, annotations: dict[str, str], capacity: dict[str, str]) -> dict[str, Any]:
    return node_with(name, annotations, capacity)


def pod(limits: dict[str, str], name: str = "p") -> dict[str, Any]:
    return limits_pod(limits, name=name)


def cluster_of(*items: dict[str, Any]) -> tuple[Any, list[str]]:
    cluster = _native.Cluster()
    _, _, _, errors = cluster.apply_list_page(orjson.dumps({"kind": "List", "items": list(items)}))
    return cluster, errors


def explain(cluster: Any, limits: dict[str, str]) -> dict[str, Any]:
    return explained(cluster, orjson.dumps(pod(limits)), 0, None, None)


def test_cores_are_compute_units_and_memory_0_takes_the_whole_card():
    cluster, errors = cluster_of(node("amd-0", {AMD_REGISTER: amd_devices(2)}, {"amd.com/gpu": "8"}))
    assert errors == []
    out = explain(cluster, {"amd.com/gpu": "1", "amd.com/gpucores": "25"})
    assert out["node"] == "amd-0", out
    # 25 % of 104 compute units is 26; no memory named is the whole card; the entry names the model.
    assert out["annotations"]["hami.io/amd-devices-allocated"] == "amd-1,AMD-Instinct-MI210,65536,26:;", out
    out = explain(cluster, {"amd.com/gpu": "1", "amd.com/gpumem": "1000", "amd.com/gpucores": "1"})
    assert out["annotations"]["hami.io/amd-devices-allocated"] == "amd-1,AMD-Instinct-MI210,1000,1:;", out


def test_a_node_without_amd_capacity_holds_no_amd_devices():
    cluster, _ = cluster_of(node("amd-0", {AMD_REGISTER: amd_devices(2)}, {"amd.com/gpu": "0"}))
    out = explain(cluster, {"amd.com/gpu": "1"})
    assert out["node"] is None, out
    assert out["failed"]["amd-0"] == "node unregistered", "HAMi's cache holds no device of the node"


def test_the_webhook_fails_a_core_limit_outside_1_to_100():
    cluster = _native.Cluster()
    review = {
        "request": {"uid": "r", "namespace": "default", "object": pod({"amd.com/gpu": "1", "amd.com/gpucores": "150"})}
    }
    response = orjson.loads(cluster.admit(orjson.dumps(review)))["response"]
    assert response["allowed"] is False
    assert response["status"] == {
        "code": 500,
        "message": "amd.com/gpucores must be an integer percentage between 1 and 100",
    }
    review["request"]["object"] = pod({"amd.com/gpu": "1", "amd.com/gpucores": "100"})
    assert orjson.loads(cluster.admit(orjson.dumps(review)))["response"]["allowed"] is True


def test_a_bad_amd_annotation_is_skipped_and_the_node_s_dcus_still_schedule():
    dcus = "".join(f"dcu-{i},4,32768,100,DCU-Z100L,0,true,{i},hami-core:" for i in range(2))
    bad = node(
        "mixed-0",
        {AMD_REGISTER: amd_devices(2)[:-3], "hami.io/node-dcu-register": dcus},
        {"amd.com/gpu": "8", "hygon.com/dcunum": "8"},
    )
    cluster, errors = cluster_of(bad)
    assert len(errors) == 1, errors
    assert "Node mixed-0" in errors[0] and AMD_REGISTER in errors[0] and "AMD devices are skipped" in errors[0], errors
    assert explain(cluster, {"hygon.com/dcunum": "1"})["node"] == "mixed-0"
    out = explain(cluster, {"amd.com/gpu": "1"})
    assert out["node"] is None and out["failed"]["mixed-0"] == "NodeInsufficientDevice", out

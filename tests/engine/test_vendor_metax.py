"""MetaX GPU as HAMi v2.10 schedules it, through the engine's Python binding: whole cards from the
node's capacity (`<node>-metax-<i>`), one card set per pod, the node score `2000 - table[n]` from
its topology annotations for every pod placed there, and a table that does not parse reported
with a line naming node and annotation while the node still schedules (HAMi scores it as empty).
HAMi's own answers are compared in test_hami_oracle_vendors.py."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hami_fast import _native
from k8s_objects import explained, node_with

LOSSES = "metax-tech.com/gpu.topology.losses"
SCORES = "metax-tech.com/gpu.topology.scores"
ALLOCATED = "hami.io/metax-gpu-devices-allocated"


def node(name: str, annotations: dict[str, str], cards: int = 4) -> dict[str, Any]:
    return node_with(name, annotations, {"metax-tech.com/gpu": str(cards)})


def explain(items: list[dict[str, Any]], containers: list[dict[str, str]], policy: str = "binpack"):
    cluster = _native.Cluster()
    _, _, _, errors = cluster.apply_list_page(orjson.dumps({"kind": "List", "items": items}))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "default",
            "uid": "u",
            "annotations": {"hami.io/node-scheduler-policy": policy},
        },
        "spec": {
            "containers": [
                {"name": f"c{i}", "image": "x", "resources": {"limits": limits}} for i, limits in enumerate(containers)
            ]
        },
    }
    return explained(cluster, orjson.dumps(pod), 0, None, None), errors


def test_cards_come_from_capacity_and_a_second_container_gets_none():
    out, _ = explain([node("mx-0", {})], [{"metax-tech.com/gpu": "2"}])
    assert out["annotations"][ALLOCATED] == "mx-0-metax-3,Metax-GPU,65536,100:mx-0-metax-2,Metax-GPU,65536,100:;"
    out, _ = explain([node("mx-0", {})], [{"metax-tech.com/gpu": "1"}, {"metax-tech.com/gpu": "1"}])
    assert out["node"] is None
    assert out["failed"]["mx-0"] == "1/4 CardTimeSlicingExhausted, 3/4 CardNotFoundCustomFilterRule", out


def test_the_topology_table_of_the_policy_scores_the_node():
    tables = {LOSSES: json.dumps({"1": 10, "2": 300}), SCORES: json.dumps({"2": 50})}
    items = [node("mx-0", tables), node("mx-1", {})]
    out, _ = explain(items, [{"metax-tech.com/gpu": "2"}])
    assert out["scores"]["mx-0"] - out["scores"]["mx-1"] == 1700.0, out["scores"]
    assert out["node"] == "mx-0", "binpack: the higher score"
    out, _ = explain(items, [{"metax-tech.com/gpu": "2"}], "spread")
    assert out["scores"]["mx-0"] - out["scores"]["mx-1"] == 1950.0, out["scores"]
    assert out["node"] == "mx-1", "spread: the lower score"


def test_a_bad_table_is_reported_and_scored_as_empty():
    items = [node("mx-0", {LOSSES: "{bad"}), node("mx-1", {})]
    out, errors = explain(items, [{"metax-tech.com/gpu": "1"}])
    assert len(errors) == 1 and "Node mx-0" in errors[0] and LOSSES in errors[0], errors
    assert out["scores"]["mx-0"] - out["scores"]["mx-1"] == 2000.0, out["scores"]


def test_an_nvidia_pod_on_a_metax_node_gets_the_table_s_entry_for_no_device():
    """HAMi pads every pod's device map with the node's MetaX type, so its MetaX score runs for an
    NVIDIA pod too, with 0 devices taken."""
    gpus = [
        {"id": f"GPU-{i}", "index": i, "count": 4, "devmem": 32768, "devcore": 100, "type": "NVIDIA-T4", "health": True}
        for i in range(2)
    ]
    items = []
    for name, tables in [("mixed-0", {LOSSES: json.dumps({"0": 5, "1": 7})}), ("mixed-1", {})]:
        item = node(name, {"hami.io/node-nvidia-register": json.dumps(gpus), **tables}, cards=2)
        item["status"]["allocatable"]["nvidia.com/gpu"] = "8"
        items.append(item)
    out, _ = explain(items, [{"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}])
    assert out["scores"] == {"mixed-0": 1995.0, "mixed-1": 0.0}, out["scores"]
    assert out["node"] == "mixed-0"

"""Vastai as HAMi v2.10 schedules it, through the engine's Python binding: whole devices by count,
die mode (the fullest cards first, a die whose card is in use refused under `mutex`, the node
scored by each container's share on its largest card), and a bad register annotation skipped with
a line naming node and annotation while the node's other backends still schedule. HAMi's own
answers are compared in test_hami_oracle_vendors.py."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hami_fast import _native
from k8s_objects import explained, node_with

VA_REGISTER = "hami.io/node-va-register"
ALLOCATED = "hami.io/Vastai-devices-allocated"


def dies(cards: list[int]) -> str:
    """One die per entry, on the card (AIC) it names."""
    devices = [
        {
            "id": f"va-{i}",
            "index": i,
            "count": 1,
            "devmem": 16384,
            "type": "Vastai-VA1",
            "health": True,
            "custominfo": {"DeviceStrategy": "die", "AIC": str(card)},
        }
        for i, card in enumerate(cards)
    ]
    return json.dumps(devices)


def node(annotations: dict[str, str], capacity: dict[str, str]) -> dict[str, Any]:
    return node_with("va-0", annotations, capacity)


def resident(allocated: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "r",
            "namespace": "default",
            "uid": "r1",
            "annotations": {"hami.io/vgpu-node": "va-0", ALLOCATED: allocated},
        },
        "spec": {"nodeName": "va-0", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running"},
    }


def explain(items: list[dict[str, Any]], limits: dict[str, str], annotations: dict[str, str] | None = None):
    cluster = _native.Cluster()
    _, _, _, errors = cluster.apply_list_page(orjson.dumps({"kind": "List", "items": items}))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u", "annotations": annotations or {}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]},
    }
    return explained(cluster, orjson.dumps(pod), 0, None, None), errors


def test_several_dies_come_from_the_card_with_most_free_dies():
    cluster = [node({VA_REGISTER: dies([0, 1, 1, 1])}, {"vastaitech.com/va": "4"})]
    out, _ = explain(cluster, {"vastaitech.com/va": "2"})
    assert out["annotations"][ALLOCATED] == "va-3,Vastai,0,0:va-2,Vastai,0,0:;", out
    # An idle node scores 0; both dies on one card add the container's share, 1.
    assert out["scores"]["va-0"] == 1.0, out
    one, _ = explain(cluster, {"vastaitech.com/va": "1"})
    assert one["annotations"][ALLOCATED] == "va-3,Vastai,0,0:;", "one die: the last in HAMi's walk order"
    four, _ = explain(cluster, {"vastaitech.com/va": "4"})
    assert four["scores"]["va-0"] == 0.75, "three of the four dies on the largest card"


def test_mutex_refuses_a_die_whose_card_is_in_use():
    items = [node({VA_REGISTER: dies([0, 0, 1, 1])}, {"vastaitech.com/va": "4"}), resident("va-0,Vastai,0,0:;")]
    out, _ = explain(items, {"vastaitech.com/va": "3"}, {"hami.io/gpu-scheduler-policy": "mutex"})
    assert out["node"] is None
    assert out["failed"]["va-0"] == (
        "1/4 CardTimeSlicingExhausted, 1/4 ExclusiveDeviceAllocateConflict, 2/4 AllocatedCardsInsufficientRequest"
    ), out
    out, _ = explain(items, {"vastaitech.com/va": "2"}, {"hami.io/gpu-scheduler-policy": "mutex"})
    assert out["annotations"][ALLOCATED] == "va-3,Vastai,0,0:va-2,Vastai,0,0:;", out


def test_a_bad_vastai_annotation_is_skipped_and_the_node_s_dcus_still_schedule():
    dcus = "".join(f"dcu-{i},4,32768,100,DCU-Z100L,0,true,{i},hami-core:" for i in range(2))
    annotations = {VA_REGISTER: dies([0, 1])[:-3], "hami.io/node-dcu-register": dcus}
    items = [node(annotations, {"vastaitech.com/va": "2", "hygon.com/dcunum": "8"})]
    out, errors = explain(items, {"hygon.com/dcunum": "1"})
    assert len(errors) == 1, errors
    assert "Node va-0" in errors[0] and VA_REGISTER in errors[0] and "Vastai devices are skipped" in errors[0], errors
    assert out["node"] == "va-0", out
    out, _ = explain(items, {"vastaitech.com/va": "1"})
    assert out["node"] is None and out["failed"]["va-0"] == "NodeInsufficientDevice", out

"""Kunlunxin XPUs as HAMi v2.10 schedules them, through the engine's Python binding: whole cards
from the node's capacity (unused cards only, chosen on the interconnect graph whose wings are
positions in HAMi's sorted list, the bubble score added to the node's), vXPU slices from a JSON
registration (memory rounded by the webhook, one slice size per card, mutex), UUID pins, and a bad
register annotation skipped with a line naming node and annotation. HAMi's own answers are
compared in test_hami_oracle_vendors.py."""

from __future__ import annotations

import base64
import json
from typing import Any

import orjson
import pytest
from hami_fast import _native
from k8s_objects import asking_pod, explain_on, node_with, resident_pod

CARDS = "kunlunxin.com/xpu"
SLICES = "kunlunxin.com/vxpu"
SLICE_MEMORY = "kunlunxin.com/vxpu-memory"
CARDS_ALLOCATED = "hami.io/kunlun-allocated"
SLICES_ALLOCATED = "hami.io/xpu-devices-allocated"
REGISTER = "hami.io/node-register-xpu"
POLICY = "hami.io/gpu-scheduler-policy"


def node(name: str, cards: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return node_with(name, annotations, {CARDS: str(cards)} if cards else {})


def slices(devmem: list[int]) -> str:
    devices = [
        {"id": f"xpu-{i}", "index": i, "count": 4, "devmem": m, "devcore": 100, "type": "XPU", "health": True}
        for i, m in enumerate(devmem)
    ]
    return json.dumps(devices)


def busy_cards(on: str, cards: list[int]) -> list[dict[str, Any]]:
    return [resident(f"r{i}", on, CARDS_ALLOCATED, f"{on}-kunlun-{i},kunlun,98304,100:;") for i in cards]


def resident(name: str, on: str, key: str, allocated: str) -> dict[str, Any]:
    return resident_pod(name, on, {key: allocated})


def explain(items: list[dict[str, Any]], limits: dict[str, str], annotations: dict[str, str] | None = None):
    return explain_on(items, asking_pod(limits, annotations=annotations))


def test_whole_cards_come_from_capacity_split_in_numa_halves_and_unused_only():
    items = [node("k", 8), *busy_cards("k", [0])]
    spread, errors = explain(items, {CARDS: "1"}, {POLICY: "spread"})
    assert errors == []
    # Spread keeps the busy card first: the left wing (positions 0-3) has 3 free cards, taken first.
    assert spread["annotations"][CARDS_ALLOCATED] == "k-kunlun-1,kunlun,98304,100:;", spread
    assert spread["annotations"]["BAIDU_COM_DEVICE_IDX"] == "1"
    # Binpack moves it to the end: positions 4-7 are cards 5, 6, 7, 0, the wing with 3 free.
    binpack, _ = explain(items, {CARDS: "1"}, {POLICY: "binpack"})
    assert binpack["annotations"][CARDS_ALLOCATED] == "k-kunlun-5,kunlun,98304,100:;", binpack
    # Base 10 * (1/800 + 100/800 + 98304/786432), and 2000: the pod's card leaves as many bubbles.
    assert spread["scores"]["k"] == pytest.approx(2002.5125), spread


def test_two_cards_need_a_wing_of_two_or_a_link_across_the_wings():
    def pinned(cards: str, policy: str = "spread"):
        out, _ = explain([node("k", 8)], {CARDS: "2"}, {"hami.io/use-xpu-uuid": cards, POLICY: policy})
        return out

    linked = pinned("k-kunlun-0,k-kunlun-4")
    assert linked["annotations"]["BAIDU_COM_DEVICE_IDX"] == "0,4", linked
    unlinked = pinned("k-kunlun-3,k-kunlun-4")
    assert unlinked["node"] is None
    assert unlinked["failed"]["k"] == "6/8 CardUuidMismatch", "one per wing, not linked: the pins are the reason"
    # Free cards sort together (busy ones last under binpack, first under spread): one wing.
    for policy in ("binpack", "spread"):
        busy, _ = explain([node("k", 8), *busy_cards("k", [0, 1, 2, 5, 6, 7])], {CARDS: "2"}, {POLICY: policy})
        assert busy["annotations"]["BAIDU_COM_DEVICE_IDX"] == "3,4", busy
    three, _ = explain([node("k", 8)], {CARDS: "3"})
    assert three["failed"]["k"] == "1/8 NumaNotFit", "HAMi takes 1, 2, 4 or 8 cards only"


def test_uuid_pins_of_both_keys_are_honoured():
    out, _ = explain([node("k", 4)], {CARDS: "1"}, {"hami.io/use-xpu-uuid": "k-kunlun-2"})
    assert out["annotations"]["BAIDU_COM_DEVICE_IDX"] == "2", out
    out, _ = explain([node("k", 4)], {CARDS: "1"}, {"baidu.com/use-gpuuuid": "gone"})
    assert out["failed"]["k"] == "4/4 CardUuidMismatch", out


def test_the_webhook_rounds_slice_memory_in_limits_and_requests():
    cluster = _native.Cluster()
    review = {
        "request": {"uid": "r", "namespace": "default", "object": asking_pod({SLICES: "1", SLICE_MEMORY: "30000"})}
    }
    response = orjson.loads(cluster.admit(orjson.dumps(review)))["response"]
    ops = json.loads(base64.b64decode(response["patch"]))
    container = {"resources": {"limits": {SLICES: "1", SLICE_MEMORY: "30000"}}}
    for op in ops:
        if op["path"].startswith("/spec/containers/0/resources/"):
            part, *name = op["path"].removeprefix("/spec/containers/0/resources/").split("/")
            value = {name[0].replace("~1", "/"): op["value"]} if name else op["value"]
            container["resources"].setdefault(part, {}).update(value)
    assert container["resources"]["limits"][SLICE_MEMORY] == "49152"
    assert container["resources"]["requests"] == {SLICE_MEMORY: "49152"}


def test_a_card_holds_slices_of_one_size():
    items = [
        node("s", 0, {REGISTER: slices([98304, 98304])}),
        resident("r", "s", SLICES_ALLOCATED, "xpu-0,XPU,24576,25:;"),
    ]
    out, _ = explain(items, {SLICES: "1", SLICE_MEMORY: "40000"})
    assert out["annotations"][SLICES_ALLOCATED] == "xpu-1,XPU,49152,50:;", out
    assert out["annotations"]["hami.io/xpu-devices-to-allocate"] == "xpu-1,XPU,49152,50:;"
    same, _ = explain(items, {SLICES: "2", SLICE_MEMORY: "24576"}, {POLICY: "spread"})
    assert same["annotations"][SLICES_ALLOCATED] == "xpu-0,XPU,24576,25:xpu-1,XPU,24576,25:;", same
    whole, _ = explain(items, {SLICES: "1"}, {POLICY: "mutex"})
    assert whole["annotations"][SLICES_ALLOCATED] == "xpu-1,XPU,98304,100:;", "no memory: a whole card"
    alone = [node("s", 0, {REGISTER: slices([98304])}), items[1]]
    refused, _ = explain(alone, {SLICES: "1", SLICE_MEMORY: "24576"}, {POLICY: "mutex"})
    assert refused["failed"]["s"] == "1/1 ExclusiveDeviceAllocateConflict", refused


def test_a_bad_xpu_annotation_is_skipped_and_the_node_s_cards_still_schedule():
    items = [node("m", 4, {REGISTER: slices([98304, 98304])[:-3]})]
    out, errors = explain(items, {CARDS: "1"})
    assert len(errors) == 1, errors
    assert "Node m" in errors[0] and REGISTER in errors[0] and "XPU devices are skipped" in errors[0], errors
    assert out["node"] == "m", out
    out, _ = explain(items, {SLICES: "1"})
    assert out["node"] is None and out["failed"]["m"] == "NodeInsufficientDevice", out


def test_bind_locks_the_node_for_slices_only():
    cluster = _native.Cluster()
    assert cluster.bind_locks(orjson.dumps(asking_pod({SLICES: "1"}))) == ["hami.io/mutex.lock"]
    assert cluster.bind_locks(orjson.dumps(asking_pod({CARDS: "1"}))) == [], "whole cards take no lock"

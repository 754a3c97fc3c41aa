"""How the oracle suites read HAMi's random answers (tests/hamigen/model.py), without the oracle."""

from __future__ import annotations

import json

from hamigen import model


def vastai_node(dies: dict[str, str]) -> dict:
    register = [{"id": u, "custominfo": {"DeviceStrategy": "die", "AIC": aic}} for u, aic in dies.items()]
    return {"kind": "Node", "metadata": {"name": "n", "annotations": {model.VASTAI_REGISTER: json.dumps(register)}}}


def test_vastai_die_lists_compare_by_their_shape_only():
    dies = model.vastai_dies([vastai_node({"d0": "0", "d1": "0", "d2": "1", "d3": "1", "d4": "2"})])
    key = model.VASTAI_KEYS[0]
    one_card = model.canonical({key: "d0,Vastai,0,0:d1,Vastai,0,0:;;"}, dies)
    other_card = model.canonical({key: "d3,Vastai,0,0:d2,Vastai,0,0:;;"}, dies)
    split = model.canonical({key: "d0,Vastai,0,0:d2,Vastai,0,0:;;"}, dies)
    assert one_card == other_card == {key: "dies 2;;"}
    assert split == {key: "dies 1+1;;"}


def test_lists_outside_die_mode_are_kept():
    dies = model.vastai_dies([vastai_node({"d0": "0"})])
    value = {model.VASTAI_KEYS[0]: "card-7,Vastai,0,0:;", model.ALLOCATED: "GPU-0,NVIDIA,10,0:;"}
    assert model.canonical(value, dies) == value
    assert model.vastai_dies([{"kind": "Node", "metadata": {"annotations": {model.VASTAI_REGISTER: "[{"}}}]) == {}


def answer(node, failed, scores, annotations=None):
    return {"node": node, "failed": failed, "scores": scores, "annotations": annotations or {}, "error": ""}


def test_resolved_takes_each_node_s_verdict_from_any_run():
    runs = [
        answer(None, {"a": "NodeInsufficientDevice", "b": "1/2 CardUuidMismatch"}, {}),
        answer(None, {"a": "1/2 CardInsufficientCore", "b": "NodeInsufficientDevice"}, {}),
    ]
    ours = answer(None, {"a": "1/2 CardInsufficientCore", "b": "1/2 CardUuidMismatch"}, {})
    assert model.resolved(runs, ours)["failed"] == ours["failed"]
    stranger = answer(None, {"a": "CardNotHealth", "b": "1/2 CardUuidMismatch"}, {})
    assert model.resolved(runs, stranger)["failed"]["a"] == "NodeInsufficientDevice"


def test_resolved_keeps_the_devices_of_every_run_as_alternatives():
    runs = [
        {**answer("a", {}, {"a": 1.0}), "vendor_devices": {"a": {"k": "x"}}},
        {**answer("a", {}, {"a": 1.0}), "vendor_devices": {"a": {"k": "y"}}},
    ]
    hami = model.resolved(runs, answer("a", {}, {"a": 1.0}))
    assert model.options(hami, "vendor_devices", "a") == [{"k": "x"}, {"k": "y"}]
    assert model.options(runs[0], "vendor_devices", "a") == [{"k": "x"}]


def test_one_run_is_taken_as_it_is():
    run = answer("a", {"b": "NodeInsufficientDevice"}, {"a": 2.0})
    assert model.resolved([run], answer(None, {}, {})) is run


def test_device_annotations_compared_include_every_backend_and_extras():
    hami = {"hami.io/vgpu-node": "a", "hami.io/dcu-devices-allocated": "x", "CAMBRICON_DSMLU_PROFILE": "1_100_10"}
    ours = {"hami.io/vgpu-node": "a", "hami.io/dcu-devices-allocated": "y", "mthreads.com/predicate-time": "1"}
    diffs = model.compare_device_annotations(hami, ours)
    assert any("dcu-devices-allocated" in d for d in diffs)
    assert any("CAMBRICON_DSMLU_PROFILE" in d for d in diffs)
    assert any("predicate-time" in d for d in diffs)
    assert model.compare_device_annotations(hami, dict(hami)) == []

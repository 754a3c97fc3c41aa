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


def ascend_node(chip: str, networks: list[int]) -> dict:
    register = [{"id": f"n{i}", "index": i, "custominfo": {"NetworkID": net}} for i, net in enumerate(networks)]
    key = f"hami.io/node-register-{chip}"
    return {"kind": "Node", "metadata": {"name": "n", "annotations": {key: json.dumps(register)}}}


def test_several_ascend_npus_compare_by_their_network_groups():
    """Equal network groups are taken in Go's map order: the shape is compared, and the runtime list
    without UUIDs; one NPU, or NPUs split over groups otherwise, still differ."""
    groups = model.device_groups([ascend_node("Ascend910B3", [0, 0, 1, 1])])
    key, runtime = "hami.io/Ascend910B3-devices-allocated", "huawei.com/Ascend910B3"

    def seen(uuids: list[str]) -> dict:
        slot = "".join(f"{u},Ascend910B3,100,0:" for u in uuids) + ";"
        listed = json.dumps([{"UUID": u, "memory": 100} for u in uuids])
        return model.canonical({key: slot, runtime: listed}, groups)

    assert seen(["n0", "n1"]) == seen(["n3", "n2"]) == {key: "dies 2;", runtime: '[{"memory":100},{"memory":100}]'}
    assert seen(["n0", "n2"]) != seen(["n0", "n1"])
    assert seen(["n0"]) != seen(["n2"]), "one NPU is HAMi's first candidate, not a random one"


def test_910c_npus_group_by_card():
    groups = model.device_groups([ascend_node("Ascend910C", [0, 0, 0, 0])])
    key = "hami.io/Ascend910C-devices-allocated"
    whole = model.canonical({key: "n2,Ascend910C,0,0:n3,Ascend910C,0,0:;"}, groups)
    halves = model.canonical({key: "n1,Ascend910C,0,0:n2,Ascend910C,0,0:;"}, groups)
    assert whole == {key: "dies 2;"} and halves == {key: "dies 1+1;"}

"""Enflame DRS vGCU as HAMi v2.10 schedules it, through the engine's Python binding: devices and
profiles from the node's `enflame.com/gcu-drs-capacity` annotation (a flawed one skipped with a
line naming node and annotation), a profile asked by its slices or by memory and cores, the
profile's slices counted as slots within the pod, the webhook's checks and copies, and the
annotations HAMi writes. HAMi's own answers are compared in test_hami_oracle_vendors.py."""

from __future__ import annotations

import base64
import json
from typing import Any

import orjson
from hami_fast import _native
from k8s_objects import asking_pod, explain_on, node_with, resident_pod

COUNT = "enflame.com/drs-gcu"
MEMORY = "enflame.com/gcu-memory"
CORES = "enflame.com/gcu-core"
CAPACITY = "enflame.com/gcu-drs-capacity"
ALLOCATED = "hami.io/enflame-vgpu-devices-allocated"
POLICY = "hami.io/gpu-scheduler-policy"
PROFILES = {"1g.6gb": "0", "3g.20gb": "1", "6g.40gb": "2"}


def node(name: str, capacities: list[Any], profiles: dict[str, str] | None = None, raw: str | None = None):
    devices = [{"index": str(i), "minor": str(10 + i), "capacity": c} for i, c in enumerate(capacities)]
    value = raw if raw is not None else json.dumps({"devices": devices, "profiles": profiles or PROFILES})
    return node_with(name, {CAPACITY: value}, {})


def resident(name: str, on: str, allocated: str) -> dict[str, Any]:
    return resident_pod(name, on, {ALLOCATED: allocated})


def test_a_profile_asked_by_its_slices_and_the_annotations_written():
    out, errors = explain_on([node("e", [6])], asking_pod({COUNT: "3"}))
    assert errors == []
    a = out["annotations"]
    assert a[ALLOCATED] == "e-enflame-drs-0,Enflame,20480,50:;", out
    assert "hami.io/enflame-vgpu-devices-to-allocate" not in a, "HAMi writes the allocated list only"
    assert json.loads(a["assigned-containers"]) == {
        "c0": {"allocated": False, "request": 3, "profileID": "1", "profileName": "3g.20gb"}
    }
    assert (a["enflame.com/gcu-assigned"], a["enflame.com/gcu-request-size"]) == ("false", "3")
    assert (a["enflame.com/gcu-assigned-index"], a["enflame.com/gcu-assigned-id"]) == ("0", "0")
    assert a["enflame.com/gcu-assigned-minor"] == "10"
    assert "enflame.com/gcu-assigned-time" in a


def test_memory_and_cores_ask_the_smallest_profile_holding_both():
    def profile(limits: dict[str, str]) -> str:
        out, _ = explain_on([node("e", [6])], asking_pod(limits))
        return json.loads(out["annotations"]["assigned-containers"])["c0"]["profileName"]

    assert profile({MEMORY: "16"}) == "3g.20gb"
    assert profile({MEMORY: "6", CORES: "51"}) == "6g.40gb", "3 of 6 slices are 50% of the cores"
    assert profile({MEMORY: "20480"}) == "3g.20gb", "above twice the largest profile's GB: MiB"
    assert profile({COUNT: "1", MEMORY: "40"}) == "1g.6gb", "the count wins"


def test_a_request_no_profile_holds_fails_as_mode_not_fit():
    for limits in ({COUNT: "2"}, {MEMORY: "41"}):
        out, _ = explain_on([node("e", [6, 6])], asking_pod(limits))
        assert out["node"] is None and out["failed"]["e"] == "1/2 ModeNotFit", out


def test_slices_count_as_slots_within_the_pod_a_resident_entry_as_one():
    out, _ = explain_on([node("e", [6])], asking_pod({COUNT: "3"}, {COUNT: "3"}))
    assert out["annotations"][ALLOCATED] == "e-enflame-drs-0,Enflame,20480,50:;e-enflame-drs-0,Enflame,20480,50:;"
    full, _ = explain_on([node("e", [6])], asking_pod({COUNT: "3"}, {COUNT: "3"}, {COUNT: "1"}))
    assert full["failed"]["e"] == "1/1 CardTimeSlicingExhausted", full
    busy = [node("e", [2]), resident("r", "e", "e-enflame-drs-0,Enflame,6144,17:;")]
    out, _ = explain_on(busy, asking_pod({COUNT: "1"}))
    assert out["node"] == "e", "a resident's 1g profile takes one slot of two"
    out, _ = explain_on(busy, asking_pod({COUNT: "1"}, annotations={POLICY: "mutex"}))
    assert out["failed"]["e"] == "1/1 ExclusiveDeviceAllocateConflict", out
    cores = [node("e", [6]), resident("r", "e", "e-enflame-drs-0,Enflame,6144,90:;")]
    out, _ = explain_on(cores, asking_pod({COUNT: "3"}))
    assert out["failed"]["e"] == "1/1 CardInsufficientCore", out


def test_a_flawed_capacity_annotation_is_skipped_naming_node_and_key():
    flawed = [
        json.dumps({"devices": [{"index": 0, "capacity": 6}], "profiles": PROFILES}),
        json.dumps({"devices": [{"index": "0", "capacity": 0}], "profiles": PROFILES}),
        json.dumps({"devices": [{"index": "0", "capacity": 6}], "profiles": {"bad": "0"}}),
        '{"devices": [',
    ]
    for raw in flawed:
        out, errors = explain_on([node("m", [], raw=raw)], asking_pod({COUNT: "1"}))
        assert len(errors) == 1 and "Node m" in errors[0] and CAPACITY in errors[0], (raw, errors)
        assert out["node"] is None and out["failed"]["m"] == "node unregistered", out


def admit(the_pod: dict[str, Any]) -> dict[str, Any]:
    review = {"request": {"uid": "r", "namespace": "default", "object": the_pod}}
    return orjson.loads(_native.Cluster().admit(orjson.dumps(review)))["response"]


def test_the_webhook_checks_and_copies_what_it_reads():
    for limits, message in (
        ({COUNT: "0"}, f"{COUNT} must be greater than 0"),
        ({MEMORY: "0"}, f"{MEMORY} must be greater than 0"),
        ({CORES: "150"}, f"{CORES} must be in range (0,100]"),
    ):
        response = admit(asking_pod(limits))
        assert not response["allowed"] and response["status"]["message"] == message, response
    asked = asking_pod({})
    asked["spec"]["containers"][0]["resources"] = {"requests": {MEMORY: "16", CORES: "50"}}
    response = admit(asked)
    ops = json.loads(base64.b64decode(response["patch"]))
    paths = {op["path"]: op["value"] for op in ops}
    assert paths["/spec/schedulerName"] == "hami-scheduler"
    assert paths["/spec/containers/0/resources/limits"] in ({MEMORY: "16"}, {CORES: "50"}), ops
    copied = {k: v for op in ops if "/limits" in op["path"] for k, v in (limit_of(op)).items()}
    assert copied == {MEMORY: "16", CORES: "50"}, ops


def limit_of(op: dict[str, Any]) -> dict[str, str]:
    if isinstance(op["value"], dict):
        return op["value"]
    return {op["path"].rsplit("/", 1)[1].replace("~1", "/"): op["value"]}


def test_twin_profiles_give_one_of_them_and_no_lock_is_taken():
    twins = {"1g.6gb": "0", "3g.20gb": "1", "3G.20GB": "7", "6g.40gb": "2"}
    out, _ = explain_on([node("e", [6], twins)], asking_pod({COUNT: "3"}))
    entry = json.loads(out["annotations"]["assigned-containers"])["c0"]
    assert (entry["profileName"], entry["profileID"]) in {("3g.20gb", "1"), ("3G.20GB", "7")}, entry
    assert _native.Cluster().bind_locks(orjson.dumps(asking_pod({COUNT: "1"}))) == []

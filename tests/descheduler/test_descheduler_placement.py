"""Typed views of a HamiPodPlacement: defaults of absent fields, the CRD's field names, writes on a copy."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hami_fast.descheduler import status as s
from hami_fast.descheduler.placement import STATUS_FIELDS, Placement, StatusUpdate
from hami_fast.kube import times

CRD = Path(__file__).resolve().parents[2] / "deploy" / "crds"


def crd_schema() -> dict:
    [path] = [p for p in CRD.glob("*.yaml") if "placement" in p.name.lower()]
    [version] = yaml.safe_load(path.read_text())["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]["properties"]


def body(**status) -> dict:
    return {
        "metadata": {"namespace": "ns", "name": "pl", "uid": "u1", "generation": 2, "creationTimestamp": times.now()},
        "spec": {
            "reqID": "r1",
            "podSelector": {"matchLabels": {"app": "infer"}},
            "nodeName": "n1",
            "gpuDevices": ["gpu-1"],
            "evictPod": "old",
        },
        "status": status,
    }


def test_an_empty_object_reads_as_the_crds_zero_values():
    p = Placement({})
    assert (p.key, p.generation, p.evictee, p.spec.req_id, p.spec.gpu_devices) == ("/", 1, "", "", [])
    st = p.status
    assert (st.phase, st.claimed_by, st.resolved_uuids, st.eviction_attempts, st.observed_generation) == (
        None,
        None,
        [],
        0,
        None,
    )
    assert not p.spec.selects({"app": "infer"}), "an empty selector matches no pod"


def test_the_views_read_the_crd_fields_by_name():
    p = Placement(body(phase=s.PENDING, resolvedUUIDs=["GPU-1"], evictionAttempts=3, claimedBy={"podName": "x"}))
    assert (p.key, p.uid, p.generation, p.evictee) == ("ns/pl", "u1", 2, "ns/old")
    assert (p.spec.req_id, p.spec.node_name, p.spec.match_labels) == ("r1", "n1", {"app": "infer"})
    assert p.spec.selects({"app": "infer", "x": "y"}) and not p.spec.selects({"app": "train"})
    assert (p.status.phase, p.status.resolved_uuids, p.status.eviction_attempts) == (s.PENDING, ["GPU-1"], 3)
    assert p.status.claimed_by == {"podName": "x"} and not p.status.finished


def test_every_status_field_written_is_one_the_crd_declares():
    declared = set(crd_schema()["status"]["properties"])
    assert set(STATUS_FIELDS.values()) <= declared
    spec_declared = set(crd_schema()["spec"]["properties"])
    assert {"reqID", "podSelector", "nodeName", "gpuDevices", "evictPod"} == spec_declared


def test_a_status_write_is_made_on_a_copy():
    original = body(phase=s.PENDING)
    kept = copy.deepcopy(original)
    update = StatusUpdate(phase=s.DELETING, message="evicted", evicted_uid="", eviction_attempts=1)
    written = Placement(original).with_status(update, (s.EVICTION, True, s.EVICTED, "accepted"))
    assert original == kept, "the view never changes the object it was given"
    raw = written.body["status"]
    assert raw["phase"] == s.DELETING and raw["evictedUID"] == "" and raw["evictionAttempts"] == 1
    assert raw["observedGeneration"] == 2, "set once, to the generation the status describes"
    assert "resolvedUUIDs" not in raw, "fields left None are not written"
    assert written.status.condition(s.EVICTION)["reason"] == s.EVICTED


def test_spec_changed_until_the_new_generation_is_validated_or_a_pod_claimed_it():
    assert Placement(body(phase=s.PENDING, observedGeneration=1)).spec_changed
    assert not Placement(body(phase=s.PENDING, observedGeneration=2)).spec_changed
    assert not Placement(body(phase=s.PENDING, observedGeneration=1, claimedBy={"podName": "x"})).spec_changed


def test_expiry_reads_the_creation_stamp_and_never_expires_a_claimed_or_evicted_one():
    old = body(phase=s.PENDING)
    old["metadata"]["creationTimestamp"] = "2000-01-01T00:00:00Z"
    assert Placement(old).expired(ttl=60)
    assert not Placement(old).expired(ttl=0), "0: never"
    assert not Placement(body(phase=s.PENDING)).expired(ttl=60)
    for claimed in ({"claimedBy": {"podName": "x"}}, {"evictedAt": times.now()}):
        old["status"] = {"phase": s.PENDING, **claimed}
        assert not Placement(old).expired(ttl=60)


@pytest.mark.parametrize(
    "status, result",
    [
        ({"phase": s.COMPLETED}, "completed"),
        ({"phase": s.PARTIAL}, "partially_completed"),
        ({"phase": s.FAILED, "conditions": [{"type": s.CLAIMED, "status": "False", "reason": s.EXPIRED}]}, "expired"),
        (
            {"phase": s.FAILED, "conditions": [{"type": s.VALIDATED, "status": "False", "reason": s.INVALID_TARGET}]},
            "rejected",
        ),
        (
            {"phase": s.FAILED, "conditions": [{"type": s.SCHEDULED, "status": "False", "reason": s.BIND_TIMEOUT}]},
            "failed",
        ),
    ],
)
def test_how_a_finished_placement_ended(status, result):
    assert Placement(body(**status)).status.result() == result


def test_two_placements_move_the_same_workload_when_namespace_and_selector_match():
    a = Placement(body())
    b = Placement(copy.deepcopy(a.body))
    other = body()
    other["spec"]["podSelector"] = {"matchLabels": {"app": "train"}}
    assert a.same_workload(b) and not a.same_workload(Placement(other))
    assert a == b and a != Placement(other), "equal by content (the GPU map's cache compares them)"

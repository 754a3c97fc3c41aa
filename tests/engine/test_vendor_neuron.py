"""AWS Neuron as HAMi v2.10 schedules it, through the engine's Python binding: devices from the
node's capacities (cores per device as slots and core bitmask) and its instance-type label, whole
devices as a run of sorted positions mapped to device indexes (any run on `inf*`, else 1/4/8/16
aligned), cores by free core bits, the webhook's checks, `AWS_NEURON_IDS` and the other annotations,
each node's own cores per device (a deliberate difference), and bad capacities skipped with a
warning naming node and key. HAMi's own answers are compared in test_hami_oracle_vendors.py."""

from __future__ import annotations

import base64
import json
from typing import Any

import orjson
from hami_fast import _native
from k8s_objects import asking_pod, explain_on, node_with, resident_pod

DEVICES = "aws.amazon.com/neuron"
CORES = "aws.amazon.com/neuroncore"
ALLOCATED = "hami.io/aws-neuron-devices-allocated"
LABEL = "node.kubernetes.io/instance-type"
POLICY = "hami.io/gpu-scheduler-policy"


def node(name: str, devices: Any, cores: Any, instance_type: str | None = None) -> dict[str, Any]:
    labels = {LABEL: instance_type} if instance_type else {}
    return node_with(name, {}, {DEVICES: str(devices), CORES: str(cores)}, labels)


def resident(name: str, on: str, allocated: str) -> dict[str, Any]:
    return resident_pod(name, on, {ALLOCATED: allocated})


def explain(items: list[dict[str, Any]], the_pod: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return explain_on(items, the_pod, now=7)


def test_a_core_goes_to_free_core_bits_of_the_last_device_and_is_named_by_core_index():
    out, errors = explain([node("n", 4, 8, "trn1.2xlarge")], asking_pod({CORES: "1"}, {CORES: "1"}))
    assert errors == []
    a = out["annotations"]
    # Both containers on the last device: core bit 1, then bit 2 (HAMi's per-device counter).
    assert a[ALLOCATED] == "n-AWSNeuron-3,AWSNeuron,0,1:;n-AWSNeuron-3,AWSNeuron,0,2:;", out
    assert a["AWS_NEURON_IDS"] == "6,7", "cores per device (2) x index 3, and + 1"
    assert a["NEURON_RESOURCE_TYPE"] == CORES
    assert (a["NEURON_ALLOCATED"], a["aws.amazon.com/predicate-node"]) == ("false", "n")
    assert a["NEURON_ALLOC_TIME"] == "7000000000"
    assert "hami.io/aws-neuron-devices-to-allocate" not in a, "HAMi writes no to-allocate list"


def test_devices_in_the_limits_are_named_by_index():
    out, _ = explain([node("n", 4, 8, "inf2.xlarge")], asking_pod({DEVICES: "2"}))
    a = out["annotations"]
    assert a[ALLOCATED] == "n-AWSNeuron-0,AWSNeuron,0,3:n-AWSNeuron-1,AWSNeuron,0,3:;", out
    assert a["AWS_NEURON_IDS"] == "0,1"
    assert "NEURON_RESOURCE_TYPE" not in a


def test_several_devices_are_a_run_of_positions_mapped_to_indexes():
    busy = resident("r", "n", "n-AWSNeuron-1,AWSNeuron,0,3:;")
    # mutex sorts the busy device first: positions 1 and 2 are free, and they name devices 1 and 2.
    out, _ = explain([node("n", 4, 8, "inf2.xlarge"), busy], asking_pod({DEVICES: "2"}, annotations={POLICY: "mutex"}))
    assert out["annotations"][ALLOCATED] == "n-AWSNeuron-1,AWSNeuron,0,3:n-AWSNeuron-2,AWSNeuron,0,3:;", out
    # Off inf* types only runs of 1, 4, 8 or 16 from a multiple of their length; no label is no inf.
    for kind in ("trn1.32xlarge", None):
        out, _ = explain([node("n", 8, 16, kind)], asking_pod({DEVICES: "3"}))
        assert out["failed"] == {"n": "1/8 NumaNotFit"}, out
    aligned, _ = explain([node("n", 8, 16, "trn1.32xlarge"), busy], asking_pod({DEVICES: "4"}))
    assert aligned["annotations"]["AWS_NEURON_IDS"] == "4,5,6,7", aligned
    inf, _ = explain([node("n", 8, 16, "inf1.6xlarge")], asking_pod({DEVICES: "3"}))
    assert inf["annotations"]["AWS_NEURON_IDS"] == "0,1,2", inf


def test_devices_asked_in_the_requests_are_named_by_their_core_bits():
    out, _ = explain([node("n", 4, 8)], asking_pod({DEVICES: "1"}, where="requests"))
    assert out["annotations"]["AWS_NEURON_IDS"] == "6,7", out
    assert out["annotations"][ALLOCATED] == "n-AWSNeuron-3,AWSNeuron,0,3:;"


def test_reasons_of_one_device():
    full = [resident(f"r{i}", "n", f"n-AWSNeuron-{i},AWSNeuron,0,3:;") for i in range(2)]
    out, _ = explain([node("n", 2, 4), *full], asking_pod({CORES: "1"}))
    assert out["failed"] == {"n": "2/2 CardInsufficientCore"}, out
    out, _ = explain([node("n", 2, 4)], asking_pod({CORES: "1"}, annotations={"aws.amazon.com/use-neuron-uuid": "x"}))
    assert out["failed"] == {"n": "2/2 CardUuidMismatch"}, out
    out, _ = explain([node("n", 2, 0)], asking_pod({DEVICES: "1"}))
    assert out["failed"] == {"n": "2/2 CardTimeSlicingExhausted"}, "no cores: no slots"


def test_the_webhook_checks_the_values_and_routes_requests_too():
    cluster = _native.Cluster()
    cluster.apply_list_page(orjson.dumps({"kind": "List", "items": [node("n", 4, 8)]}))

    def admit(p: dict[str, Any]) -> dict[str, Any]:
        review = {"request": {"uid": "r", "namespace": "default", "object": p}}
        return orjson.loads(cluster.admit(orjson.dumps(review)))["response"]

    refused = admit(asking_pod({CORES: "3"}))
    assert refused["status"] == {"code": 500, "message": f"{CORES} must be 1 or a multiple of 2, got 3"}, refused
    assert admit(asking_pod({DEVICES: "0"}))["status"]["message"] == f"{DEVICES} must be greater than 0"
    routed = admit(asking_pod({CORES: "4"}, where="requests"))
    ops = json.loads(base64.b64decode(routed["patch"]))
    assert any(op["path"] == "/spec/schedulerName" for op in ops), ops


def test_each_node_has_its_own_cores_per_device():
    """HAMi takes the first node's cores per device for every node; hami-fast each node's own, so
    the core index written on a trn2 node (8 per device) beside a trn1 node (2) is the trn2's."""
    items = [node("a-trn1", 2, 4, "trn1.2xlarge"), node("b-trn2", 2, 16, "trn2.48xlarge")]
    pinned = {"aws.amazon.com/use-neuron-uuid": "b-trn2-AWSNeuron-1"}
    out, _ = explain(items, asking_pod({CORES: "1"}, annotations=pinned))
    assert out["node"] == "b-trn2", out
    assert out["annotations"]["AWS_NEURON_IDS"] == "8", "cores per device 8 x index 1"
    whole, _ = explain(items, asking_pod({DEVICES: "1"}, annotations=pinned))
    assert whole["annotations"]["AWS_NEURON_IDS"] == "1"


def test_a_bad_capacity_is_skipped_with_a_warning_naming_node_and_key():
    out, errors = explain([node("m", "1500m", 8), node("n", 2, 4)], asking_pod({DEVICES: "1"}))
    assert len(errors) == 1 and "Node m" in errors[0] and DEVICES in errors[0], errors
    assert out["node"] == "n", out
    out, errors = explain([node("h", 10**12, 8)], asking_pod({DEVICES: "1"}))
    assert len(errors) == 1 and "Node h" in errors[0] and DEVICES in errors[0], errors
    assert out["node"] is None, "no devices registered"
    _, errors = explain([node("k", 2, "2.5")], asking_pod({DEVICES: "1"}))
    assert len(errors) == 1 and "Node k" in errors[0] and CORES in errors[0] and "no cores" in errors[0], errors


def test_bind_takes_no_lock():
    cluster = _native.Cluster()
    assert cluster.bind_locks(orjson.dumps(asking_pod({CORES: "1"}))) == []

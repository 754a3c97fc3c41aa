"""The native module's surface: codecs round-trip, errors name the field, no panic crosses the boundary."""

from __future__ import annotations

import threading

import orjson
import pytest
from hami_fast import _native
from hami_fast._native import Cluster, EngineError

REGISTER = (
    '[{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,"devcore":100,'
    '"type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true},'
    '{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,"devcore":100,'
    '"type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true}]'
)


def test_register_roundtrip_is_byte_exact() -> None:
    devices = orjson.loads(_native.decode_node_register(REGISTER))
    assert [d.get("index", 0) for d in devices] == [0, 1]
    assert _native.encode_node_register(orjson.dumps(devices)) == REGISTER


def test_legacy_register_is_accepted() -> None:
    devices = orjson.loads(_native.decode_node_register("GPU-a,10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:"))
    assert devices == [
        {
            "id": "GPU-a",
            "index": 1,
            "count": 10,
            "devmem": 7680,
            "devcore": 100,
            "type": "NVIDIA-Tesla P4",
            "mode": "hami-core",
            "health": True,
        }
    ]


@pytest.mark.parametrize(
    "value",
    ["GPU-a,NVIDIA,3000,30:;", ";;GPU-main1,NVIDIA,2000,50:;", "GPU-a,NVIDIA,1,2:GPU-b,NVIDIA,3,4:;GPU-a,NVIDIA,5,0:;"],
)
def test_pod_devices_roundtrip(value: str) -> None:
    assert _native.encode_pod_devices(_native.decode_pod_devices(value)) == value


def test_node_lock_roundtrip() -> None:
    value = "2025-06-01T12:00:05Z,default,gpu-pod"
    assert _native.parse_node_lock(value) == ("2025-06-01T12:00:05Z", "default", "gpu-pod")
    assert _native.format_node_lock(*_native.parse_node_lock(value)) == value
    assert _native.parse_node_lock("2025-06-01T12:00:05Z") == ("2025-06-01T12:00:05Z", "", "")


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: _native.decode_node_register("[]"), "no gpu found"),
        (lambda: _native.decode_node_register("[{"), "hami.io/node-nvidia-register"),
        (lambda: _native.decode_pod_devices("GPU-a,NVIDIA,1:;"), "hami.io/vgpu-devices-allocated"),
        (lambda: _native.parse_node_lock("a,b"), "hami.io/mutex.lock"),
        (lambda: Cluster(b'{"unknown_knob": 1}'), "unknown_knob"),
        (lambda: Cluster().apply(b"{not json"), "decode object"),
        (lambda: Cluster().apply(b'{"kind":"Node","metadata":{"name":7}}'), "Node"),
    ],
)
def test_bad_input_raises_engine_error_naming_the_field(call, needle: str) -> None:
    with pytest.raises(EngineError, match=needle):
        call()
    assert issubclass(EngineError, ValueError)


@pytest.mark.parametrize(
    ("call", "kind", "field", "message"),
    [
        (lambda: _native.decode_pod_devices("GPU-a,NVIDIA,1000,0:;GPU-b,NVIDIA,x,0:;"), "invalid",
         "annotation hami.io/vgpu-devices-allocated, container slot 1, device 0",
         'memory "x" is not an int32 (in "GPU-b,NVIDIA,x,0")'),
        (lambda: _native.decode_node_register("GPU-a,10,1,100,T,0,true:GPU-b,10,1,100,T,0,yes:"), "invalid",
         "annotation hami.io/node-nvidia-register, device 1, health", '"yes" is not a bool'),
        (lambda: _native.decode_node_register("[]"), "invalid", "annotation hami.io/node-nvidia-register",
         "no gpu found on node"),
        (lambda: _native.parse_node_lock("a,b"), "invalid", "annotation hami.io/mutex.lock",
         "node lock \"a,b\" must be '<RFC3339>,<namespace>,<name>'"),
    ],
)  # fmt: skip
def test_codec_errors_are_typed(call, kind: str, field: str, message: str) -> None:
    with pytest.raises(EngineError) as err:
        call()
    assert (err.value.kind, err.value.object, err.value.field) == (kind, "", field)
    assert str(err.value) == f"{field}: {message}"


def test_malformed_allocation_in_a_watch_line_names_pod_annotation_slot_and_device() -> None:
    cluster = Cluster()
    pod = {
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u",
            "annotations": {
                "hami.io/vgpu-node": "n1",
                "hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,1000,0:;GPU-b,NVIDIA,1000:;",
            },
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Running"},
    }
    event_type, _, key, _, error = cluster.apply_watch_event(orjson.dumps({"type": "ADDED", "object": pod}))
    assert (event_type, key) == ("ADDED", "ns/p")
    assert error == (
        "Pod ns/p: annotation hami.io/vgpu-devices-allocated: container slot 1, device 0: "
        '"GPU-b,NVIDIA,1000" needs 4 comma fields UUID,TYPE,MEM,CORES'
    )
    with pytest.raises(EngineError) as err:
        cluster.apply_watch_event(b'{"type": "ADDED", "object": ')
    assert (err.value.kind, err.value.object) == ("decode", "watch event")
    assert "\n" not in str(err.value)


def test_huge_and_hostile_bodies_do_not_crash() -> None:
    cluster = Cluster()
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(EngineError):
        cluster.apply(deep)
    decision = cluster.decide(deep, 1)
    assert orjson.loads(decision.response)["Error"].startswith("decode ExtenderArgs")
    assert (decision.outcome, decision.pod_key, decision.node, decision.patch) == ("error", "", None, None)
    big_pod = {
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"x": "y" * 5_000_000}},
        "spec": {"containers": []},
    }
    cluster.apply(orjson.dumps(big_pod))
    assert orjson.loads(cluster.admit(b"\xff\xfe"))["response"]["status"]["code"] == 400


def test_filter_runs_concurrently_from_threads() -> None:
    cluster = Cluster()
    devices = [
        {"id": f"G{i}", "index": i, "count": 10, "devmem": 1000, "devcore": 100, "type": "NVIDIA-T4", "health": True}
        for i in range(4)
    ]
    cluster.apply(
        orjson.dumps(
            {
                "kind": "Node",
                "metadata": {
                    "name": "n",
                    "annotations": {"hami.io/node-nvidia-register": orjson.dumps(devices).decode()},
                },
            }
        )
    )
    placed: list[str] = []
    lock = threading.Lock()

    def schedule(i: int) -> None:
        pod = {
            "metadata": {"name": f"p{i}", "namespace": "d", "uid": f"u{i}"},
            "spec": {
                "containers": [
                    {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "300"}}}
                ]
            },
        }
        decision = cluster.decide(orjson.dumps({"Pod": pod, "NodeNames": ["n"]}), 1)
        assert (decision.outcome == "scheduled") == bool(orjson.loads(decision.response)["NodeNames"])
        if decision.outcome == "scheduled":
            with lock:
                placed.append(f"p{i}")

    threads = [threading.Thread(target=schedule, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    # 4 cards x 1000 MiB, 300 MiB each: exactly 3 per card fit, never more.
    assert len(placed) == 12
    usage = orjson.loads(cluster.usage())
    assert all(d["usedmem"] == 900 and d["used"] == 3 for d in usage[0]["devices"])


def test_decide_returns_the_decision_as_typed_fields() -> None:
    cluster = Cluster()
    devices = [
        {"id": "G0", "index": 0, "count": 10, "devmem": 1000, "devcore": 100, "type": "NVIDIA-T4", "health": True}
    ]
    register = orjson.dumps(devices).decode()
    cluster.apply(
        orjson.dumps(
            {"kind": "Node", "metadata": {"name": "n", "annotations": {"hami.io/node-nvidia-register": register}}}
        )
    )
    pod = {
        "metadata": {"name": "p", "namespace": "d", "uid": "u-1"},
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "300"}}}]
        },
    }
    d = cluster.decide(orjson.dumps({"Pod": pod, "NodeNames": ["n", "ghost"]}), 7)
    assert (d.outcome, d.pod_key, d.namespace, d.name, d.uid, d.node) == ("scheduled", "u-1", "d", "p", "u-1", "n")
    assert orjson.loads(d.response)["NodeNames"] == ["n"]
    patch = orjson.loads(d.patch or b"")
    assert patch["metadata"]["labels"] == {"hami.io/vgpu-node": "n"}
    assert d.devices == patch["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"]
    assert d.reason_counts == {"node unregistered": 1}
    assert d.events[0][:2] == ("Normal", "FilteringSucceed")
    assert cluster.release(d.pod_key)
    big = dict(pod, metadata={"name": "q", "namespace": "d"})
    big["spec"] = {
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "9000"}}}]
    }
    d = cluster.decide(orjson.dumps({"Pod": big, "NodeNames": ["n"]}), 7)
    assert (d.outcome, d.node, d.patch, d.pod_key) == ("unschedulable", None, None, "d/q")
    assert d.reason_counts == {"CardInsufficientMemory": 1}
    assert cluster.decide(b"{", 7).outcome == "error"
    assert d.error is None


def test_a_filter_error_is_carried_as_the_typed_error_the_response_reads() -> None:
    decision = Cluster().decide(b'{"NodeNames": ["n"]}', 7)
    assert decision.outcome == "error" and isinstance(decision.error, EngineError)
    assert (decision.error.kind, decision.error.object) == ("invalid", "")
    assert orjson.loads(decision.response)["Error"] == str(decision.error) == "extender args missing pod"
    broken = Cluster().decide(b"{", 7)
    assert broken.error is not None and (broken.error.kind, broken.error.object) == ("decode", "ExtenderArgs")

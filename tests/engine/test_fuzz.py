"""Hostile input never crashes the engine: every entry point either answers or raises EngineError."""

from __future__ import annotations

import json

import orjson
from hami_fast import _native
from hami_fast._native import Cluster, EngineError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=30,
)
annotation_text = st.text(alphabet=st.sampled_from(list('GPU-0123,:;NVIDIA {}[]"a-z\\n')), max_size=80)


def dumps(value: object) -> bytes:
    """stdlib JSON: unlike orjson it writes integers beyond 64 bits, which the engine must refuse cleanly."""
    return json.dumps(value).encode()


FUZZ = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def answers_or_refuses(call, *args) -> None:
    try:
        call(*args)
    except EngineError:
        pass


@FUZZ
@given(annotation_text)
def test_codecs_never_crash(text: str) -> None:
    for codec in (_native.decode_node_register, _native.decode_pod_devices, _native.parse_node_lock):
        answers_or_refuses(codec, text)


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(["kind", "metadata", "spec", "status", "items", "apiVersion"]), json_values, max_size=6
    ),
    annotation_text,
)
def test_objects_and_watch_lines_never_crash(obj: dict, annotation: str) -> None:
    cluster = Cluster()
    if isinstance(obj.get("metadata"), dict):
        obj["metadata"]["annotations"] = {
            "hami.io/node-nvidia-register": annotation,
            "hami.io/vgpu-node": "n",
            "hami.io/vgpu-devices-allocated": annotation,
        }
    for kind in ("Node", "Pod", "ResourceQuota", "NodeList", None):
        if kind:
            obj["kind"] = kind
        body = dumps(obj)
        answers_or_refuses(cluster.apply, body)
        answers_or_refuses(cluster.delete, body)
        answers_or_refuses(cluster.apply_watch_event, dumps({"type": "MODIFIED", "object": obj}))
    assert isinstance(orjson.loads(cluster.usage()), list)


@FUZZ
@given(st.binary(max_size=200) | json_values.map(dumps))
def test_extender_and_webhook_bodies_always_get_an_answer(body: bytes) -> None:
    cluster = Cluster()
    decision = cluster.decide(body, 1)
    response = orjson.loads(decision.response)
    assert "Error" in response
    assert (decision.outcome == "error") == bool(response["Error"]), (decision.outcome, response)
    review = orjson.loads(cluster.admit(body))
    assert review["kind"] == "AdmissionReview" and "allowed" in review["response"]
    answers_or_refuses(_native.parse_binding_args, body)
    answers_or_refuses(cluster.explain, body, 1)
    answers_or_refuses(cluster.headroom, body)

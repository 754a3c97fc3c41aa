"""MetaX sGPU as HAMi v2.10 schedules it, through the engine's Python binding: cards from the
`metax-tech.com/node-gpu-devices` JSON, a bad list skipped with a line naming node and annotation,
the webhook's app-class and QoS checks, HAMi's own reasons (CardUnhealthy, CardAppClassMismatch,
CardQosPolicyMismatch), online pods taking no cores and preferring cards with fewer online pods,
whole cards kept within a MetaLink zone, the policy-neutral score, the annotations written, and the
QoS switch a placement asks, read by later Filters until the card's registration shows it. HAMi's
own answers are compared in test_hami_oracle_vendors.py."""

from __future__ import annotations

import base64
import json
from typing import Any

import orjson
import pytest
from hami_fast import _native
from k8s_objects import explained, limits_pod, node_with

COUNT = "metax-tech.com/sgpu"
CORES = "metax-tech.com/vcore"
MEMORY = "metax-tech.com/vmemory"
REGISTER = "metax-tech.com/node-gpu-devices"
ALLOCATED = "hami.io/metax-sgpu-devices-allocated"
METAX_ALLOCATED = "metax-tech.com/gpu-devices-allocated"
CLASS = "metax-tech.com/sgpu-app-class"
QOS = "metax-tech.com/sgpu-qos-policy"
TOPOLOGY = "metax-tech.com/sgpu-topology-aware"
SMALL = {COUNT: "1", CORES: "10", MEMORY: "4"}


def card(uuid: str, qos: str = "", zone: int = 0, healthy: bool = True, vram: int = 32768) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "totalDevCount": 8,
        "totalCompute": 100,
        "totalVRam": vram,
        "healthy": healthy,
        "qosPolicy": qos,
        "linkZone": zone,
    }


def node(name: str, cards: list[dict[str, Any]] | str) -> dict[str, Any]:
    value = cards if isinstance(cards, str) else json.dumps(cards)
    return node_with(name, {REGISTER: value}, {COUNT: "8"})


def resident(name: str, on: str, allocated: str, app_class: str | None = None) -> dict[str, Any]:
    annotations = {"hami.io/vgpu-node": on, ALLOCATED: allocated}
    if app_class:
        annotations[CLASS] = app_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations},
        "spec": {"nodeName": on, "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running"},
    }


def pod(limits: dict[str, str], annotations: dict[str, str] | None = None, name: str = "p") -> dict[str, Any]:
    return limits_pod(limits, annotations or {}, name)


def cluster(items: list[dict[str, Any]]) -> tuple[Any, list[str]]:
    c = _native.Cluster()
    _, _, _, errors = c.apply_list_page(orjson.dumps({"kind": "List", "items": items}))
    return c, errors


def explain(items, limits, annotations=None, node_policy=None):
    c, errors = cluster(items)
    return explained(c, orjson.dumps(pod(limits, annotations)), 0, node_policy, None), errors


def test_cards_register_from_json_and_a_bad_list_is_skipped_naming_node_and_key():
    good = node("a", [card("a0"), card("a1", healthy=False)])
    bad = node("b", json.dumps([card("b0")])[:-3])
    out, errors = explain([good, bad], {COUNT: "1", CORES: "50", MEMORY: "4"})
    assert len(errors) == 1 and "Node b" in errors[0] and REGISTER in errors[0], errors
    assert out["node"] == "a", out
    assert out["annotations"][ALLOCATED] == "a0,Metax-SGPU,4096,50:;", "a bare vmemory is GiB"
    assert out["annotations"]["hami.io/metax-sgpu-devices-to-allocate"] == out["annotations"][ALLOCATED]
    assert out["annotations"][METAX_ALLOCATED] == '[[{"uuid":"a0","compute":50,"vRam":4096}]]'
    assert "metax-tech.com/predicate-time" in out["annotations"]
    assert out["failed"]["b"] == "node unregistered", out
    two, _ = explain([good], {COUNT: "2", CORES: "50"})
    assert two["failed"]["a"] == "1/2 AllocatedCardsInsufficientRequest, 1/2 CardUnhealthy", two


def test_app_classes_on_a_card():
    items = [node("a", [card("a0")]), resident("r", "a", "a0,Metax-SGPU,1024,0:;", "online")]
    offline, _ = explain(items, {COUNT: "1", CORES: "10"}, {CLASS: "offline"})
    assert offline["failed"]["a"] == "1/1 CardAppClassMismatch", "no offline pod beside an online one"
    plain, _ = explain(items, {COUNT: "1", CORES: "10"})
    assert plain["failed"]["a"] == "1/1 CardAppClassMismatch", "a classed card takes no unclassed pod"
    online, _ = explain(items, {COUNT: "1", CORES: "10", MEMORY: "4"}, {CLASS: "online"})
    assert online["annotations"][ALLOCATED] == "a0,Metax-SGPU,4096,0:;", "online pods take no cores"


def test_online_pods_prefer_cards_with_fewer_online_pods_and_avoid_offline_only_cards():
    cards = [card("c0"), card("c1"), card("c2")]
    items = [
        node("a", cards),
        resident("r0", "a", "c0,Metax-SGPU,1024,0:;", "online"),
        resident("r1", "a", "c1,Metax-SGPU,1024,10:;", "offline"),
        resident("r2", "a", "c2,Metax-SGPU,1024,0:;", "online"),
        resident("r3", "a", "c2,Metax-SGPU,1024,0:;", "online"),
    ]
    out, _ = explain(items, {COUNT: "1", MEMORY: "1"}, {CLASS: "online"})
    assert out["annotations"][ALLOCATED] == "c0,Metax-SGPU,1024,0:;", out
    # -20 per online pod on the card taken, weighted by 10000 (negated under spread).
    binpack, _ = explain(items, {COUNT: "1", MEMORY: "1"}, {CLASS: "online"}, "binpack")
    spread, _ = explain(items, {COUNT: "1", MEMORY: "1"}, {CLASS: "online"}, "spread")
    assert binpack["scores"]["a"] < -199_000 and spread["scores"]["a"] > 199_000, (binpack, spread)


def test_qos_policies_differ_and_the_webhook_checks_classes():
    items = [node("a", [card("a0", "fixed-share")]), resident("r", "a", "a0,Metax-SGPU,1024,10:;")]
    out, _ = explain(items, {COUNT: "1", CORES: "10", MEMORY: "4"})
    assert out["failed"]["a"] == "1/1 CardQosPolicyMismatch", "the webhook sets best-effort"
    same, _ = explain(items, {COUNT: "1", CORES: "10", MEMORY: "4"}, {QOS: "fixed-share"})
    assert same["node"] == "a", same
    c, _ = cluster(items)
    for asked, message in [
        ({CLASS: "batch"}, "metax-tech.com/sgpu-app-class must be set one of [online, offline]"),
        ({QOS: "gold"}, "metax-tech.com/sgpu-qos-policy must be set one of [best-effort, fixed-share, burst-share]"),
    ]:
        review = {"request": {"uid": "r", "namespace": "default", "object": pod({COUNT: "1"}, asked)}}
        response = orjson.loads(c.admit(orjson.dumps(review)))["response"]
        assert response["allowed"] is False and response["status"]["message"] == message, response
    two = {"request": {"uid": "r", "namespace": "default", "object": pod({COUNT: "2"}, {CLASS: "online"})}}
    assert "single device" in orjson.loads(c.admit(orjson.dumps(two)))["response"]["status"]["message"]
    plain = {"request": {"uid": "r", "namespace": "default", "object": pod({COUNT: "1"})}}
    ops = json.loads(base64.b64decode(orjson.loads(c.admit(orjson.dumps(plain)))["response"]["patch"]))
    added = {op["path"]: op["value"] for op in ops}
    assert added.get("/metadata/annotations") == {QOS: "best-effort"}, ops


def test_whole_cards_stay_within_a_metalink_zone_and_score_it():
    cards = [card("z1a", zone=1), card("z1b", zone=1), card("z1c", zone=1), card("z2a", zone=2), card("z2b", zone=2)]
    out, _ = explain([node("a", cards)], {COUNT: "2"}, {TOPOLOGY: "true"})
    taken = {e.split(",")[0] for e in out["annotations"][ALLOCATED].rstrip(";").split(":") if e}
    assert taken == {"z2a", "z2b"}, "the smallest zone that holds both"
    # 10 x the pair taken, less the pairs broken among idle cards (none): 100, weighted by 10000.
    assert out["scores"]["a"] == pytest.approx(100 * 10000, abs=100), out
    off, _ = explain([node("a", cards)], {COUNT: "2"}, {TOPOLOGY: "false"})
    assert off["scores"]["a"] < 100, "the config's sgpuTopologyAware (off) unless the pod says"


def test_a_placement_s_qos_switch_holds_until_the_card_registers_it():
    cards = [card("a0", "fixed-share")]
    c, _ = cluster([node("a", cards)])
    first = c.decide(orjson.dumps({"Pod": pod(SMALL, {QOS: "best-effort"}, "one"), "NodeNames": ["a"]}), 0)
    assert first.node == "a"
    fixed = pod(SMALL, {QOS: "fixed-share"}, "two")
    second = c.decide(orjson.dumps({"Pod": fixed, "NodeNames": ["a"]}), 0, record=False)
    assert second.node is None, "the card is switching to best-effort: a fixed-share pod waits"
    c.apply(orjson.dumps(node("a", [card("a0", "best-effort")])))
    third = c.decide(orjson.dumps({"Pod": pod(SMALL, {QOS: "best-effort"}, "three"), "NodeNames": ["a"]}), 0)
    assert third.node == "a", "the registration shows the switch: done"

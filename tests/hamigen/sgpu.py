"""MetaX sGPU in the vendor generator: cards as its device plugin registers them
(`metax-tech.com/node-gpu-devices`, protocol.go), app classes and QoS policies on residents and on
the new pod, and which cases HAMi decides at random.

Corner cases drawn: cards of several QoS policies (and none) on one node, MetaLink zones (none,
pairs, halves, some cards outside, a negative zone), unhealthy cards, online and offline pods mixed
on a card, whole-card (100 cores) asks of one or several cards, `sgpu-topology-aware` on the pod
(and in the config variants), app classes the webhook refuses.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from hamigen.vendor_specs import SGPU_APP_CLASS, SGPU_QOS, SGPU_TOPOLOGY

POLICIES = ["best-effort", "fixed-share", "burst-share"]


def one_in(draw, n: int) -> bool:
    return draw(st.sampled_from([False] * (n - 1) + [True]))


def card(d: dict[str, Any], qos: str, zone: int) -> dict[str, Any]:
    """A card in the plugin's JSON from a generic device (id, count, devmem, devcore, numa, health)."""
    out: dict[str, Any] = {
        "uuid": d["id"],
        "bdf": f"0000:{d['index']:02x}:00.0",
        "model": "MXC500",
        "totalDevCount": d["count"],
        "totalCompute": d["devcore"],
        "totalVRam": d["devmem"],
        "numa": d.get("numa", 0),
        "healthy": d["health"],
    }
    if qos:
        out["qosPolicy"] = qos
    if zone:
        out["linkZone"] = zone
    return out


def cards_json(devices: list[dict[str, Any]]) -> str:
    return json.dumps([card(d, "", 0) for d in devices])


def zones(draw, n: int) -> list[int]:
    layout = draw(st.sampled_from(["none", "pairs", "pairs", "halves", "halves", "partial", "random"]))
    if layout == "none":
        return [0] * n
    if layout == "pairs":
        return [i // 2 + 1 for i in range(n)]
    if layout == "halves":
        return [i // max(1, n // 2) + 1 for i in range(n)]
    if layout == "partial":
        return [0 if i % 3 == 2 else i // 3 + 1 for i in range(n)]
    return [draw(st.sampled_from([0, 1, 1, 2, 2, 3, -1])) for _ in range(n)]


@st.composite
def registration(draw, b, node: str, now: int) -> tuple[dict, dict, dict, list]:
    """Annotations, capacity, allocatable and the cards HAMi will see."""
    n = draw(st.sampled_from([1, 2, 2, 3, 4, 4, 6, 8, 8]))
    split = draw(st.sampled_from([4, 8, 16, 2]))
    vram = draw(st.sampled_from([16384, 32768, 65536]))
    policy_mix = draw(st.sampled_from(["none", "one", "mixed", "mixed"]))
    one = draw(st.sampled_from(POLICIES))
    zone_of = zones(draw, n)
    devs, cards = [], []
    for i in range(n):
        d = {
            "id": f"sgpu-{node}-{i}",
            "index": i,
            "count": draw(st.sampled_from([split] * 4 + [1])),
            "devmem": vram if not one_in(draw, 6) else draw(st.sampled_from([16384, 32768, 65536])),
            "devcore": draw(st.sampled_from([100] * 8 + [200, 0])),
            "numa": draw(st.sampled_from([0, 0, i % 2])),
            "health": not one_in(draw, 8),
        }
        qos = {"none": "", "one": one}.get(policy_mix) or draw(st.sampled_from(["", *POLICIES, *POLICIES]))
        devs.append(d)
        cards.append(card(d, qos, zone_of[i]))
    body = json.dumps(cards, separators=(",", ":"))
    state = draw(st.sampled_from(["ok"] * 20 + ["missing", "malformed", "empty", "null"]))
    ann = {b.register_key: {"ok": body, "malformed": body[:-3], "empty": "[]", "null": "null"}.get(state, body)}
    if state == "missing":
        ann = {}
    status = {b.count: str(sum(d["count"] for d in devs))}
    return ann, status, dict(status), devs if state == "ok" else []


@st.composite
def resident_annotations(draw) -> dict[str, str]:
    """A resident's app class: none, online or offline (its QoS policy changes nothing for it)."""
    cls = draw(st.sampled_from([None, None, "online", "online", "offline", "offline"]))
    return {SGPU_APP_CLASS: cls} if cls else {}


def limits(draw, b) -> dict[str, str | None]:
    def amount(values: list[Any]) -> str | None:
        v = draw(st.sampled_from(values))
        return None if v is None else str(v)

    return {
        b.count: amount([1, 1, 1, 1, 1, 2, 2, 3, 4, 0]),
        b.memory: amount([None, None, 0, 4, 8, 16, 64, "1000", "1500", "4Gi", "0.5", "8192Mi"]),
        b.cores: amount([None, None, 0, 10, 30, 50, 100, 100, 150]),
    }


@st.composite
def pod_annotations(draw) -> dict[str, str]:
    out = {}
    cls = draw(st.sampled_from([None] * 4 + ["online", "online", "offline", "offline", "batch"]))
    if cls:
        out[SGPU_APP_CLASS] = cls
    qos = draw(st.sampled_from([None] * 3 + POLICIES + ["gold"]))
    if qos and not one_in(draw, 12 if qos != "gold" else 1):
        out[SGPU_QOS] = qos
    topo = draw(st.sampled_from([None] * 3 + ["true", "true", "false", "1", "maybe"]))
    if topo:
        out[SGPU_TOPOLOGY] = topo
    return out


def one_card_each(containers: list[dict[str, Any]], count: str) -> None:
    """App-class pods must ask one card per container: most of them do."""
    for c in containers:
        for part in (c.get("resources") or {}).values():
            if count in part:
                part[count] = "1"


def zone_ties(items: list[dict[str, Any]], register_key: str) -> bool:
    """Some node's cards fall in two MetaLink zones, or in two zones of none (0 and a negative
    one): HAMi takes the zones in Go's map order, sorted by how many cards pass in each, so two of
    them may tie whatever their sizes on the node."""
    for obj in items:
        if obj.get("kind") != "Node":
            continue
        try:
            cards = json.loads((obj["metadata"].get("annotations") or {}).get(register_key, "[]"))
        except json.JSONDecodeError:
            continue
        zones = {c.get("linkZone", 0) for c in cards if isinstance(c, dict)} if isinstance(cards, list) else set()
        if len([z for z in zones if z > 0]) > 1 or len([z for z in zones if z <= 0]) > 1:
            return True
    return False


def random_in_hami(case: dict[str, Any], b) -> bool:
    """A pod without an app class asking whole cards (100 cores, the default) of a node with zone
    ties: which zone a container takes is random in HAMi, and so is what its later containers find."""
    pod = case["pod"]
    if SGPU_APP_CLASS in (pod["metadata"].get("annotations") or {}):
        return False
    spec = pod.get("spec") or {}
    whole = any(
        b.count in lim and lim.get(b.cores, "100") == "100"
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
        for lim in [(c.get("resources") or {}).get("limits") or {}]
    )
    return whole and zone_ties(case["items"], b.register_key)


SGPU_LISTS = ("hami.io/metax-sgpu-devices-allocated", "hami.io/metax-sgpu-devices-to-allocate")
METAX_LIST = "metax-tech.com/gpu-devices-allocated"


def zone_groups(items: list[dict[str, Any]], register_key: str = "metax-tech.com/node-gpu-devices") -> dict[str, str]:
    """The cards of every node with zone ties (zone_ties), by zone: HAMi's choice among them is
    random, so a container's cards there are compared by how many it takes from each zone."""
    out = {}
    for obj in items:
        if obj.get("kind") != "Node" or not zone_ties([obj], register_key):
            continue
        cards = json.loads(obj["metadata"]["annotations"][register_key])
        for c in cards:
            if isinstance(c, dict):
                out[c.get("uuid")] = f"zone {c.get('linkZone', 0)}"
    return out


def without_uuids(value: str) -> str:
    """MetaX's own list with its cards' UUIDs left out (their sizes kept, sorted)."""
    try:
        containers = json.loads(value)
    except json.JSONDecodeError:
        return value
    if not isinstance(containers, list):
        return value
    kept = [sorted(json.dumps({k: v for k, v in e.items() if k != "uuid"}) for e in c) for c in containers]
    return json.dumps(kept)

"""The planner on every HAMi backend: what `plan --for` promises, the engine's own Filter keeps.

Clusters of every vendor family come from tests/hamigen (registrations, residents and asking pods
as HAMi's device plugins and scheduler write them), with the residents owned by a ReplicaSet so
the planner may move them. Each plan that unblocks the pod is run as the descheduler runs it, one
move at a time: the move is validated on the cluster as the earlier moves left it, the pod goes,
its replacement (the same spec, pinned by the annotations validation returns) passes the engine's
Filter on the move's node alone and takes the move's devices, and stays there with the allocation
Filter wrote. Then the pending pod fits on the target node with the target's devices.

Two kinds of cluster: the generated ones with every node twice (a twin with the same devices and
residents, so pods have somewhere to go), and crowded ones (small pods spread one per device by
the engine's Filter until a pod asking a whole device's cores, or two cards, fits nowhere), where a family whose
clusters never need a move fails: a change that silently stops moving a backend is seen.
Seeded (HAMI_ORACLE_SEED, as the other generated suites; HAMI_PLAN_VENDOR_BATCHES for more).
"""

from __future__ import annotations

import copy
import os
import time
from typing import Any

import orjson
import pytest
from hami_fast import _native
from hamigen import model, seeding
from hamigen.vendor_oracle import backends_asked, engine_settings
from hamigen.vendor_specs import FAMILIES, VENDORS, Backend
from hamigen.vendors import vendor_cases
from hypothesis import given, note
from hypothesis import strategies as st

BATCH = 8
BATCHES = int(os.environ.get("HAMI_PLAN_VENDOR_BATCHES", "10"))
# Backends whose Fit reads no UUID filter (HAMi's Enflame GCU takes whole cards by type only): a
# replacement lands on the move's node, not necessarily on its devices.
UNPINNED = {"enflame"}


def movable(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items with every pod owned by a ReplicaSet (the planner moves only what is recreated)."""
    out = copy.deepcopy(items)
    for obj in out:
        if obj.get("kind") == "Pod":
            obj["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "controller": True}]
    return out


def with_twins(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each node twice: a twin with the same registration and the same residents (names, device
    ids and UIDs renamed), so that pods can move between nodes that are equally full."""
    out = list(items)
    for node in [o for o in items if o.get("kind") == "Node"]:
        name = node["metadata"]["name"]
        on_node = [o for o in items if o.get("kind") == "Pod" and name in orjson.dumps(o).decode()]
        for obj in [node, *on_node]:
            text = orjson.dumps(obj).decode().replace(name, name + "t")
            twin = orjson.loads(text)
            if twin["kind"] == "Pod":
                twin["metadata"]["name"] += "-" + name + "t"
                twin["metadata"]["uid"] += "-" + name + "t"
            out.append(twin)
    return out


def as_list(items: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def only_node(items: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [o for o in items if o.get("kind") != "Node" or o["metadata"]["name"] == name]


def devices_of(annotations: dict[str, str]) -> set[str]:
    lists = [v for k, v in annotations.items() if model.is_device_list(k)]
    return {e.split(",")[0] for v in lists for slot in v.split(";") for e in slot.split(":") if e}


def families_asked(pod: dict[str, Any]) -> set[str]:
    return {b.family for backends in FAMILIES.values() for b in backends if b.common_word in backends_asked(pod)}


def replacement(pod: dict[str, Any], pin: dict[str, str]) -> dict[str, Any]:
    """What the pod's controller creates after the eviction, as the pinning webhook leaves it."""
    meta = pod["metadata"]
    kept = {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith("hami.io/")}
    name = meta["name"] + "-r"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**meta, "name": name, "uid": "uid-" + name, "annotations": {**kept, **pin}},
        "spec": {k: v for k, v in pod["spec"].items() if k != "nodeName"},
        "status": {"phase": "Pending"},
    }


def explain_alone(items, pod, node: str, case, now: int) -> dict[str, Any]:
    settings = engine_settings()
    return model.engine_explain(only_node(items, node), pod, case["node_policy"], case["gpu_policy"], now, settings)


def run_move(items, move, case, now: int, config: bytes) -> list[str]:
    """Runs one move on `items` (in place); what went otherwise than the plan said."""
    to = move["to"]
    check = orjson.loads(_native.validate_target([as_list(items)], move["pod"], to["node"], to["gpus"], config))
    if not check["ok"]:
        return [f"move {move} refused at validation: {check['message']}"]
    namespace, name = move["pod"].split("/", 1)
    at = next(i for i, o in enumerate(items) if o["kind"] == "Pod" and o["metadata"]["name"] == name)
    if items[at]["metadata"].get("namespace", "default") != namespace:
        return [f"move {move} names a pod the cluster does not hold"]
    new = replacement(items.pop(at), check["pin"])
    answer = explain_alone(items, new, to["node"], case, now)
    if answer["node"] != to["node"]:
        return [
            f"move {move}: Filter refuses the replacement on {to['node']}: {answer.get('failed') or answer.get('error')}"
        ]
    taken = devices_of(answer["annotations"])
    if not families_asked(new) & UNPINNED and taken != set(to["gpus"]):
        return [f"move {move}: the replacement (pinned by {check['pin']}) took {sorted(taken)}, not the move's devices"]
    new["metadata"]["annotations"].update(answer["annotations"])
    new["spec"]["nodeName"], new["status"]["phase"] = to["node"], "Running"
    items.append(new)
    return []


def check_plan(case: dict[str, Any], now: int) -> tuple[list[str], bool]:
    """(What the plan promised that Filter does not keep, whether it moved a pod)."""
    items = movable(case["items"])
    # The scheduler's default policies, as serve's flags set them for the explain runs below.
    policies = {"node_scheduler_policy": case["node_policy"], "gpu_scheduler_policy": case["gpu_policy"]}
    config = orjson.dumps({**engine_settings(), **policies})
    options = orjson.dumps({"for_pod": case["pod"], "max_moves": 6})
    try:
        plan = orjson.loads(_native.plan([as_list(items)], options, config))
    except _native.EngineError:
        return [], False  # not a pod the planner makes room for (it asks nothing it can read)
    if not plan["unblocked"]:
        return [], False
    refused = model.engine_explain(items, case["pod"], "", "", now, engine_settings()).get("error")
    if refused:
        return [], False  # refused before any node is looked at (a quota): no move changes that
    for move in plan["moves"]:
        if problems := run_move(items, move, case, now, config):
            return problems, True
    target = plan["target"]
    answer = explain_alone(items, case["pod"], target["node"], case, now)
    if answer["node"] != target["node"]:
        return [f"after {len(plan['moves'])} moves the pod does not fit on {target}: {answer.get('failed')}"], True
    return [], bool(plan["moves"])


@pytest.mark.parametrize("family", [f for f in VENDORS if f != "nvidia"])
def test_plan_for_moves_run_as_the_engine_filter_decides(family):
    moved = []

    @seeding.seeded_batches(BATCHES)
    @given(st.lists(vendor_cases(family, (family,)), min_size=BATCH, max_size=BATCH))
    def run(batch):
        now = int(time.time())
        for case in batch:
            problems, did_move = check_plan({**case, "items": with_twins(case["items"])}, now)
            moved.append(did_move)
            if problems:
                note(orjson.dumps(case).decode())
            assert not problems, f"{seeding.describe()}: {problems}"

    run()
    assert moved, f"{family}: no case ran"


# Families whose cores are a device's percent: a device shared by a few small pods is no room for
# a pod that asks all of its cores, and a move makes one. (Moore Threads, AWS Neuron and Enflame
# DRS count cores in their own units, Ascend's cores exist only in the soft split, MetaX GPUs
# mostly register one slot per card: the crowding below builds no such case for them; the
# generated cases above cover them.)
CORE_FAMILIES = ["hygon", "iluvatar", "cambricon", "amd", "metax-sgpu"]


def small_pod(name: str, b: Backend, cores: int, memory: str) -> dict[str, Any]:
    limits = {b.count: "1", b.cores: str(cores), **({b.memory: memory} if b.memory else {})}
    container = {"name": "c", "image": "x", "resources": {"limits": limits}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": "uid-" + name},
        "spec": {"containers": [container]},
        "status": {"phase": "Pending"},
    }


def places(items: list[dict[str, Any]], pod: dict[str, Any], now: int) -> bool:
    return bool(model.engine_explain(items, pod, "spread", "spread", now, engine_settings()).get("node"))


def crowded(case: dict[str, Any], b: Backend, now: int) -> dict[str, Any]:
    """The case's nodes (and twins) with small pods spread one per device, placed by the engine's
    Filter, until a pod asking a whole device's cores fits nowhere; that pod is the case's pod."""
    items = [o for o in with_twins(case["items"]) if o.get("kind") == "Node"]
    # The least memory the backend's unit allows that a device takes (MiB for most, GiB or
    # 512 MiB blocks for some): the pods then differ by cores only.
    fits = [m for m in ("1024", "2", "1") if places(items, small_pod("probe", b, 100, m), now)]
    memory = fits[0] if fits else "1"
    pending = small_pod("whole", b, 100, memory)
    for i in range(48):
        if not places(items, pending, now):
            break
        filler = small_pod(f"fill-{i}", b, 30, memory)
        answer = model.engine_explain(items, filler, "spread", "spread", now, engine_settings())
        if not answer.get("node"):
            break
        filler["metadata"]["annotations"] = answer["annotations"]
        filler["spec"]["nodeName"], filler["status"]["phase"] = answer["node"], "Running"
        items.append(filler)
    return {**case, "items": items, "pod": pending, "node_policy": "spread", "gpu_policy": "spread"}


def check_crowded(family: str, crowd) -> None:
    """Runs check_plan on clusters `crowd(case, backend, now)` builds from the family's cases; fails
    if none needed a move."""
    moved = []

    @seeding.seeded_batches(BATCHES)
    @given(st.lists(vendor_cases(family, (family,)), min_size=3, max_size=3), st.data())
    def run(batch, data):
        now = int(time.time())
        for case in batch:
            problems, did_move = check_plan(crowd(case, data.draw(st.sampled_from(FAMILIES[family]))), now)
            moved.append(did_move)
            if problems:
                note(orjson.dumps(case).decode())
            assert not problems, f"{seeding.describe()}: {problems}"

    run()
    assert any(moved), f"{family}: no crowded cluster needed a move; the suite checks nothing for it"


@pytest.mark.parametrize("family", CORE_FAMILIES)
def test_plan_for_makes_a_whole_device_free_as_the_engine_filter_keeps(family):
    check_crowded(family, lambda case, b: crowded(case, b, int(time.time())))


# Backends whose cards a pod takes whole or by slot count: small pods spread one card each leave
# no node with two free cards, and consolidating them makes one. (Kunlunxin's two-card pairs
# must be linked on its graph: spread one-card pods leave none to consolidate into.)
CARD_BACKENDS = {"enflame": 0, "biren": 0, "vastai": 0}


def card_pod(name: str, b: Backend, cards: int) -> dict[str, Any]:
    container = {"name": "c", "image": "x", "resources": {"limits": {b.count: str(cards)}}}
    meta = {"name": name, "namespace": "default", "uid": "uid-" + name}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [container]}}


def crowded_cards(case: dict[str, Any], b: Backend, now: int) -> dict[str, Any]:
    """The case's nodes (and twins) with one-card pods spread by the engine's Filter until a pod
    asking two cards of one node fits nowhere; that pod is the case's pod."""
    items = [o for o in with_twins(case["items"]) if o.get("kind") == "Node"]
    pending = card_pod("two", b, 2)
    for i in range(64):
        if not places(items, pending, now):
            break
        filler = card_pod(f"card-{i}", b, 1)
        answer = model.engine_explain(items, filler, "spread", "spread", now, engine_settings())
        if not answer.get("node"):
            break
        filler["metadata"]["annotations"] = answer["annotations"]
        filler["spec"]["nodeName"], filler["status"] = answer["node"], {"phase": "Running"}
        items.append(filler)
    return {**case, "items": items, "pod": pending, "node_policy": "spread", "gpu_policy": "spread"}


@pytest.mark.parametrize("family", list(CARD_BACKENDS))
def test_plan_for_makes_two_cards_free_on_one_node_as_the_engine_filter_keeps(family):
    b = FAMILIES[family][CARD_BACKENDS[family]]
    check_crowded(family, lambda case, _: crowded_cards(case, b, int(time.time())))

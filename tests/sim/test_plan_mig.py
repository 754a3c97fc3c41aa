"""`hami-fast plan --for` on clusters with GPUs in MIG mode, its promise checked by running it.

Each cluster is built from tests/hamigen/mig.py's NVML profiles. The plan is applied as the
descheduler applies it: each moved pod's old copy is deleted and its replacement, pinned to the
move's GPUs (`nvidia.com/use-gpuuuid`), is placed by the engine's own Filter (`explain`); it must
land exactly where the plan says, MIG instance (profile and placement) included. Then the waiting
pod, holding the plan's reservation, must be placed by the engine on the plan's target with the
instance the plan names. Where HAMi's oracle is present, HAMi v2.10's own Filter is asked the
same questions on the same states and must answer with the same bytes
(`hami.io/vgpu-devices-allocated`, `hami.io/vgpu-mig-allocations`).
"""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hami_fast import _native
from hami_fast.cli import main
from hamigen import mig, model, oracle, seeding
from hypothesis import given, note
from hypothesis import strategies as st
from k8s_objects import node_with_devices

ALLOCATED = model.ALLOCATED
RESERVATION = "hami-fast.io/reservation"
RESERVATION_EXPIRES = "hami-fast.io/reservation-expires"
USE_UUID = "nvidia.com/use-gpuuuid"
ALLOCATION_KEYS = ("hami.io/vgpu-node", ALLOCATED, model.TO_ALLOCATE, mig.MIG_KEY, "hami.io/bind-phase")
needs_oracle = pytest.mark.skipif(oracle.find_oracle() is None, reason=oracle.SKIP_REASON)


def profile(model_name: str, name: str) -> dict[str, Any]:
    return next(p for p in mig.MIG_MODELS[model_name][1] if p["name"] == name)


def mig_gpu(node: str, i: int, model_name: str) -> dict[str, Any]:
    memory, profiles = mig.MIG_MODELS[model_name]
    return {
        "id": f"GPU-{node}-{i}",
        "index": i,
        "count": mig.instance_count(profiles),
        "devmem": memory,
        "devcore": 100,
        "type": model_name,
        "mode": "mig",
        "migProfiles": profiles,
        "health": True,
    }


def plain_gpu(node: str, i: int, model_name: str) -> dict[str, Any]:
    memory = mig.PLAIN_MODELS[model_name]
    return {
        "id": f"GPU-{node}-{i}",
        "index": i,
        "count": 10,
        "devmem": memory,
        "devcore": 100,
        "type": model_name,
        "mode": "hami-core",
        "health": True,
    }


def spec_pod(name: str, memory: int, owned: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "labels": {"app": name},
        "annotations": {},
    }
    if owned:
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"rs-{name}", "uid": f"rs-{name}"}
        meta["ownerReferences"] = [dict(owner, controller=True)]
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(memory)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]},
        "status": {"phase": "Pending"},
    }


def running(pod: dict[str, Any], node_name: str, allocated: str, mig_allocations: str | None) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    ann = pod["metadata"]["annotations"]
    ann.update({"hami.io/vgpu-node": node_name, ALLOCATED: allocated, model.TO_ALLOCATE: allocated})
    ann["hami.io/bind-phase"] = "success"
    if mig_allocations is not None:
        ann[mig.MIG_KEY] = mig_allocations
    pod["spec"]["nodeName"] = node_name
    pod["status"] = {"phase": "Running"}
    return pod


def mig_resident(name: str, gpu: str, model_name: str, profile_name: str, start: int, owned: bool = True):
    """A running pod (request 4000 MiB) holding one instance of `profile_name` at slice `start`."""
    p = profile(model_name, profile_name)
    return instance_pod(name, gpu, p, {"start": start, "size": p["placements"][0]["size"]}, 4000, owned)


def instance_pod(name: str, gpu: str, prof: dict[str, Any], placement: dict[str, int], request: int, owned: bool):
    alloc = {"containerIndex": 0, "deviceIndex": 0, "gpuUUID": gpu, "profile": prof["name"], "placement": placement}
    node_name = gpu.removeprefix("GPU-").rsplit("-", 1)[0]
    allocated = f"{gpu},NVIDIA,{prof['memoryMB']},{prof['core']}:;"
    allocations = json.dumps([alloc], separators=(",", ":"))
    return running(spec_pod(name, request, owned), node_name, allocated, allocations)


def plain_resident(name: str, gpu: str, memory: int, owned: bool = True) -> dict[str, Any]:
    node_name = gpu.removeprefix("GPU-").rsplit("-", 1)[0]
    return running(spec_pod(name, memory, owned), node_name, f"{gpu},NVIDIA,{memory},0:;", None)


def plan_for(tmp_path: Path, capsys, items: list[dict[str, Any]], waiting: dict[str, Any]) -> dict[str, Any]:
    snapshot, manifest = tmp_path / "cluster.json", tmp_path / "pod.json"
    snapshot.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    manifest.write_bytes(orjson.dumps(waiting))
    code = main(["plan", "--snapshot", str(snapshot), "--for", str(manifest), "--output", "json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def explain(items: list[dict[str, Any]], pod: dict[str, Any]) -> dict[str, Any]:
    return model.engine_explain(items, pod, "binpack", "spread", int(time.time()))


def granted(answer: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The GPUs (in order, once each) and the MIG instances `{gpu, profile, placement}` of an answer."""
    gpus: list[str] = []
    for slot in model.slots_of(answer["annotations"][ALLOCATED]):
        for device in filter(None, slot.split(":")):
            uuid = device.split(",")[0]
            if uuid not in gpus:
                gpus.append(uuid)
    allocations = json.loads(answer["annotations"].get(mig.MIG_KEY) or "[]")
    return gpus, [{"gpu": a["gpuUUID"], "profile": a["profile"], "placement": a["placement"]} for a in allocations]


def replacement(pod: dict[str, Any], gpus: list[str]) -> dict[str, Any]:
    """The moved pod as its controller recreates it, pinned by the placement webhook."""
    new = copy.deepcopy(pod)
    ann = new["metadata"]["annotations"]
    for key in ALLOCATION_KEYS:
        ann.pop(key, None)
    ann[USE_UUID] = ",".join(gpus)
    new["metadata"]["uid"] += "-moved"
    new["spec"].pop("nodeName", None)
    new["status"] = {"phase": "Pending"}
    return new


def same_as_hami(items: list[dict[str, Any]], pod: dict[str, Any], ours: dict[str, Any]) -> None:
    hami = oracle.run(model.hami_view(items), pod, "binpack", "spread")
    assert hami.get("node") == ours["node"], (hami, ours)
    for key in (ALLOCATED, mig.MIG_KEY):
        assert hami["annotations"].get(key) == ours["annotations"].get(key), (key, hami, ours)


def apply_plan(items: list[dict[str, Any]], result: dict[str, Any], ask_hami: bool) -> list[dict[str, Any]]:
    """Runs the moves in order; each replacement must land as the move says. Returns the new items."""
    items = copy.deepcopy(items)
    for move in result["moves"]:
        name = move["pod"].split("/")[1]
        i = next(k for k, o in enumerate(items) if o["kind"] == "Pod" and o["metadata"]["name"] == name)
        old = items.pop(i)
        new = replacement(old, move["to"]["gpus"])
        ours = explain(items, new)
        assert ours["node"] == move["to"]["node"], (move, ours.get("failed"))
        assert granted(ours) == (move["to"]["gpus"], move["to"].get("mig", [])), (move, ours["annotations"])
        if ask_hami:
            same_as_hami(items, new, ours)
        items.append(running(new, ours["node"], ours["annotations"][ALLOCATED], ours["annotations"].get(mig.MIG_KEY)))
    return items


def check_promise(items, waiting, result, ask_hami: bool, pin_for_hami: bool = False) -> dict[str, Any]:
    """The waiting pod, holding the plan's reservation, is placed on the target as the plan says.
    HAMi (which ignores hami-fast's reservation) is asked for the pod as it is, or pinned to the
    target's GPUs where other GPUs could take it too."""
    assert result["unblocked"] is True, result
    target = result["target"]
    after = apply_plan(items, result, ask_hami)
    held = copy.deepcopy(waiting)
    held["metadata"]["annotations"].update(
        {RESERVATION: f"{target['node']}/{','.join(target['gpus'])}", RESERVATION_EXPIRES: "2999-01-01T00:00:00Z"}
    )
    ours = explain([*after, held], held)
    assert ours["node"] == target["node"], ours
    assert granted(ours) == (target["gpus"], target.get("mig", [])), (target, ours["annotations"])
    if ask_hami:
        asked = copy.deepcopy(waiting)
        if pin_for_hami:
            asked["metadata"]["annotations"][USE_UUID] = ",".join(target["gpus"])
        same_as_hami(after, asked, ours)
    before = explain(items, waiting)
    assert before["node"] is None, f"the pod fitted before the moves: {before}"
    return ours


A40 = "NVIDIA-A100-SXM4-40GB"
A80 = "NVIDIA-A100-SXM4-80GB"


def whole_card() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A waiting pod needing a whole A100 (7g.40gb) while 1g instances of movable pods sit on both cards."""
    items = [
        node_with_devices("node-a", [mig_gpu("node-a", 0, A40), mig_gpu("node-a", 1, A40)]),
        mig_resident("a", "GPU-node-a-0", A40, "1g.5gb", 6),
        mig_resident("b", "GPU-node-a-0", A40, "1g.5gb", 5),
        mig_resident("c", "GPU-node-a-1", A40, "1g.5gb", 6),
        mig_resident("d", "GPU-node-a-1", A40, "1g.5gb", 5),
    ]
    return items, spec_pod("whole", 40000)


def fragmented() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Enough memory, no placement: a 2g at slices 0-1, 1g at 3 and 1g at 6 leave no 3g slot on card 0;
    card 1's pods are bare (not movable)."""
    items = [
        node_with_devices("node-a", [mig_gpu("node-a", 0, A40), mig_gpu("node-a", 1, A40)]),
        mig_resident("big2g", "GPU-node-a-0", A40, "2g.10gb", 0),
        mig_resident("low1g", "GPU-node-a-0", A40, "1g.5gb", 3),
        mig_resident("top1g", "GPU-node-a-0", A40, "1g.5gb", 6),
        mig_resident("fixed3g", "GPU-node-a-1", A40, "3g.20gb", 0, owned=False),
        mig_resident("fixed1g", "GPU-node-a-1", A40, "1g.5gb", 6, owned=False),
    ]
    return items, spec_pod("w", 15000)


def mixed() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A whole plain A100 for the pod: its two 4 GB pods must go. Each card of the MIG node has
    memory, cores and slots for both, but one free placement (slice 4): one pod per card."""
    items = [node_with_devices("node-m", [mig_gpu("node-m", 0, A80), mig_gpu("node-m", 1, A80)])]
    for card in (0, 1):
        gpu = f"GPU-node-m-{card}"
        items.append(mig_resident(f"f3g-{card}", gpu, A80, "3g.40gb", 0, owned=False))
        items.append(mig_resident(f"f1a-{card}", gpu, A80, "1g.10gb", 6, owned=False))
        items.append(mig_resident(f"f1b-{card}", gpu, A80, "1g.10gb", 5, owned=False))
    items.append(node_with_devices("node-p", [plain_gpu("node-p", 0, A40)]))
    items.append(plain_resident("x", "GPU-node-p-0", 4000))
    items.append(plain_resident("y", "GPU-node-p-0", 4000))
    return items, spec_pod("whole", 40000)


def test_whole_card_after_moving_1g_instances(tmp_path, capsys):
    items, waiting = whole_card()
    result = plan_for(tmp_path, capsys, items, waiting)
    assert len(result["moves"]) == 2, result["moves"]
    target = result["target"]
    assert [i["profile"] for i in target["mig"]] == ["7g.40gb"]
    starts = sorted(m["to"]["mig"][0]["placement"]["start"] for m in result["moves"])
    assert starts == [3, 4], "the other card's free slices, each granted once"
    assert all(m["to"]["gpus"] != target["gpus"] for m in result["moves"])
    check_promise(items, waiting, result, ask_hami=False)


def test_fragmented_placements_move_the_pod_in_the_way(tmp_path, capsys):
    items, waiting = fragmented()
    before = explain(items, waiting)
    assert before["failed"]["node-a"] == "2/2 CardMigTopologyInfeasible", before
    result = plan_for(tmp_path, capsys, items, waiting)
    assert [m["pod"] for m in result["moves"]] == ["default/top1g"], "the 1g at slice 6, not the largest pod"
    assert result["moves"][0]["to"]["mig"] == [
        {"gpu": "GPU-node-a-1", "profile": "1g.5gb", "placement": {"start": 5, "size": 1}}
    ]
    ours = check_promise(items, waiting, result, ask_hami=False)
    assert granted(ours)[1] == [{"gpu": "GPU-node-a-0", "profile": "3g.20gb", "placement": {"start": 4, "size": 4}}]


def test_mixed_nodes_grant_each_free_placement_once(tmp_path, capsys):
    items, waiting = mixed()
    result = plan_for(tmp_path, capsys, items, waiting)
    assert result["target"]["gpus"] == ["GPU-node-p-0"] and "mig" not in result["target"]
    landed = sorted((m["to"]["gpus"][0], [i["placement"]["start"] for i in m["to"]["mig"]]) for m in result["moves"])
    assert landed == [("GPU-node-m-0", [4]), ("GPU-node-m-1", [4])], result["moves"]
    check_promise(items, waiting, result, ask_hami=False)


def test_plan_text_output_on_mig(tmp_path, capsys):
    items, waiting = fragmented()
    snapshot, manifest = tmp_path / "cluster.json", tmp_path / "pod.json"
    snapshot.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    manifest.write_bytes(orjson.dumps(waiting))
    assert main(["plan", "--snapshot", str(snapshot), "--for", str(manifest)]) == 0
    out = capsys.readouterr().out
    assert "default/top1g  node-a/GPU-node-a-0 [1g.5gb@6] -> node-a/GPU-node-a-1 [1g.5gb@5]" in out, out
    assert "target: node-a/GPU-node-a-0 [3g.20gb@4] (held for it (reservation))" in out, out


def test_pending_queue_on_mig(tmp_path, capsys):
    """`--objective pending` (the descheduler's --auto) plans the same MIG moves for the queue."""
    items, waiting = fragmented()
    snapshot = tmp_path / "cluster.json"
    snapshot.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": [*items, waiting]}))
    args = ["plan", "--snapshot", str(snapshot), "--objective", "pending", "--max-moves", "4"]
    assert main([*args, "--output", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [m["pod"] for m in result["moves"]] == ["default/top1g"], result["moves"]
    (placed,) = result["placements"]
    assert placed["mig"] == [{"gpu": "GPU-node-a-0", "profile": "3g.20gb", "placement": {"start": 4, "size": 4}}]
    assert main(args) == 0
    assert "default/w -> node-a/GPU-node-a-0 [3g.20gb@4] (1 moves)" in capsys.readouterr().out


@needs_oracle
@pytest.mark.parametrize("cluster", [whole_card, fragmented, mixed])
def test_hami_places_as_the_plan_says(tmp_path, capsys, cluster):
    """HAMi's own Filter on every state the plan passes through: the same replacement placements
    and, at the end, the waiting pod on the freed instance."""
    items, waiting = cluster()
    result = plan_for(tmp_path, capsys, items, waiting)
    check_promise(items, waiting, result, ask_hami=True)


# --- random MIG clusters: every plan that promises keeps its promise ---

RANDOM_CASES = int(os.environ.get("HAMI_PLAN_MIG_CASES", "200"))
RANDOM_SEEN = {"cases": 0, "unblocked_by_moves": 0, "moves": 0, "moves_onto_mig": 0, "targets_on_mig": 0}
HAMI_CHECKED = {"plans": 0, "states": 0}
DRAWN_MODELS = sorted(mig.MIG_MODELS)


@st.composite
def busy_gpu(draw, node_name: str, i: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A GPU (mostly in MIG mode, with a subset of its profiles now and then) and the residents on it:
    instances at any free placement (other schedulers and departed neighbours leave every layout)."""
    if draw(st.integers(0, 4)) == 0:
        plain = draw(st.sampled_from(sorted(mig.PLAIN_MODELS)))
        dev = plain_gpu(node_name, i, plain)
        pods = []
        for k in range(draw(st.integers(0, 3))):
            memory = draw(st.sampled_from([2000, 4000, 8000]))
            pods.append(plain_resident(f"{node_name}-{i}-{k}", dev["id"], memory, owned=draw(st.integers(0, 5)) > 0))
        return dev, pods
    model_name = draw(st.sampled_from(DRAWN_MODELS))
    dev = mig_gpu(node_name, i, model_name)
    if draw(st.integers(0, 5)) == 0:
        dev["migProfiles"] = draw(mig.mig_profiles(model_name))
        dev["count"] = max(1, mig.instance_count(dev["migProfiles"]))
    held: list[dict[str, int]] = []
    pods = []
    for k in range(draw(st.integers(0, 6))):
        got = draw(mig.instance(dev, held))
        if got is None:
            break
        prof, placement = got
        held.append(placement)
        request = draw(st.sampled_from([1000, 3000, prof["memoryMB"]]))
        owned = draw(st.integers(0, 5)) > 0
        pods.append(instance_pod(f"{node_name}-{i}-{k}", dev["id"], prof, placement, request, owned))
    return dev, pods


@st.composite
def busy_clusters(draw) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 3))):
        name = f"node-{n}"
        drawn = [draw(busy_gpu(name, i)) for i in range(draw(st.integers(1, 3)))]
        items.append(node_with_devices(name, [dev for dev, _ in drawn]))
        items.extend(pod for _, pods in drawn for pod in pods)
    waiting = spec_pod("waiting", draw(st.sampled_from([15000, 20000, 30000, 40000, 4000, 9000, 80000])))
    limits = waiting["spec"]["containers"][0]["resources"]["limits"]
    limits["nvidia.com/gpu"] = str(draw(st.sampled_from([1, 1, 1, 1, 2])))
    if draw(st.integers(0, 4)) == 0:
        waiting["metadata"]["annotations"]["hami.io/gpu-scheduler-policy"] = draw(
            st.sampled_from(["binpack", "spread"])
        )
    return items, waiting


@seeding.seeded_batches(RANDOM_CASES)
@given(busy_clusters())
def test_random_mig_plans_keep_their_promise(cluster):
    items, waiting = cluster
    note(json.dumps({"items": items, "pod": waiting}))
    snapshot = orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    result = orjson.loads(_native.plan([snapshot], orjson.dumps({"for_pod": waiting, "max_moves": 6})))
    RANDOM_SEEN["cases"] += 1
    if not result["unblocked"] or not result["moves"]:
        return
    RANDOM_SEEN["unblocked_by_moves"] += 1
    RANDOM_SEEN["moves"] += len(result["moves"])
    RANDOM_SEEN["moves_onto_mig"] += sum(bool(m["to"].get("mig")) for m in result["moves"])
    RANDOM_SEEN["targets_on_mig"] += bool(result["target"].get("mig"))
    check_promise(items, waiting, result, ask_hami=False)


def test_the_random_draw_plans_moves_onto_mig():
    """The random test above is only worth something if many of its plans move pods onto MIG instances."""
    if RANDOM_SEEN["cases"] == 0:
        pytest.skip("run together with test_random_mig_plans_keep_their_promise")
    print(f"random MIG plans: {RANDOM_SEEN}")
    assert RANDOM_SEEN["unblocked_by_moves"] >= RANDOM_SEEN["cases"] // 10, RANDOM_SEEN
    assert RANDOM_SEEN["moves_onto_mig"] >= RANDOM_SEEN["unblocked_by_moves"] // 3, RANDOM_SEEN
    assert RANDOM_SEEN["targets_on_mig"] >= RANDOM_SEEN["unblocked_by_moves"] // 3, RANDOM_SEEN


@needs_oracle
@seeding.seeded_batches(int(os.environ.get("HAMI_PLAN_MIG_ORACLE_CASES", "150")))
@given(busy_clusters())
def test_random_mig_plans_match_hami(cluster):
    """HAMi's own Filter on every state a random plan passes through (the waiting pod pinned to the
    target's GPUs): the same node, device list and MIG instances as the engine."""
    items, waiting = cluster
    note(json.dumps({"items": items, "pod": waiting}))
    snapshot = orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    result = orjson.loads(_native.plan([snapshot], orjson.dumps({"for_pod": waiting, "max_moves": 6})))
    if result["unblocked"] and result["moves"]:
        check_promise(items, waiting, result, ask_hami=True, pin_for_hami=True)
        HAMI_CHECKED["plans"] += 1
        HAMI_CHECKED["states"] += len(result["moves"]) + 1
    print(f"random MIG plans checked by HAMi: {HAMI_CHECKED}", end="\r")

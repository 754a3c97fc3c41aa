"""hami_fast against HAMi v2.10.0's own code on clusters with GPUs in MIG mode (dynamic MIG).

Random clusters from tests/hamigen/mig.py go through HAMi's real webhook and Filter
(shared/tools/hami-oracle, HAMi's built-in default device config) and through hami_fast's
`explain`. Besides what tests/engine/test_hami_oracle.py compares (verdict, every node's reason, every
score as float32, the devices on every fitting node), the MIG instances HAMi reserves
(`hami.io/vgpu-mig-allocations`: profile and placement per container device) must be the same
bytes on the chosen node.

The draw is seeded like the main suite (HAMI_ORACLE_SEED; tests/hamigen/seeding.py); CI runs
HAMI_ORACLE_MIG_BATCHES (default 40) batches of 8 cases. Skips where the oracle is absent.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
from hamigen import mig, model, oracle, seeding
from hypothesis import given, note
from hypothesis import strategies as st
from k8s_objects import limits_pod, node_with_devices

pytestmark = [
    pytest.mark.skipif(oracle.find_oracle() is None, reason=oracle.SKIP_REASON),
    pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]

BATCH = 8
BATCHES = int(os.environ.get("HAMI_ORACLE_MIG_BATCHES", "40"))


def mig_diffs(hami: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    if hami.get("error") or not hami.get("node") or hami["node"] != ours.get("node"):
        return []
    theirs, mine = hami["annotations"].get(mig.MIG_KEY), ours["annotations"].get(mig.MIG_KEY)
    return [] if theirs == mine else [f"annotation {mig.MIG_KEY}: HAMi {theirs!r}, hami_fast {mine!r}"]


def check(batch: list[dict[str, Any]]) -> dict[str, int]:
    """Compares every case with HAMi; returns how many HAMi placed, and on a MIG instance."""
    calls = [
        dict(items=c["items"], pod=c["pod"], node_policy=c["node_policy"], gpu_policy=c["gpu_policy"]) for c in batch
    ]
    answers = oracle.run_many(calls)
    now = int(time.time())
    failures, seen = [], {"placed": 0, "mig": 0}
    for case, hami in zip(batch, answers, strict=True):
        ours = model.engine_explain(case["items"], case["pod"], case["node_policy"], case["gpu_policy"], now)
        diffs = model.compare(case, hami, ours, now) + mig_diffs(hami, ours)
        seen["placed"] += bool(hami.get("node"))
        seen["mig"] += mig.MIG_KEY in (hami.get("annotations") or {})
        if diffs:
            failures.append({"case": case, "hami": hami, "hami_fast": ours, "diffs": diffs})
    for f in failures[:3]:
        note(json.dumps(f, sort_keys=True))
    assert not failures, (
        f"{seeding.describe()}: {len(failures)} of {len(batch)} MIG cases disagree with HAMi: "
        + "; ".join(d for f in failures[:5] for d in f["diffs"])
    )
    return seen


TOTALS = {"cases": 0, "placed": 0, "mig": 0}


@seeding.seeded_batches(BATCHES)
@given(st.lists(mig.mig_cases(), min_size=BATCH, max_size=BATCH))
def test_random_mig_clusters_match_hami(batch):
    seen = check(batch)
    TOTALS["cases"] += len(batch)
    TOTALS["placed"] += seen["placed"]
    TOTALS["mig"] += seen["mig"]


def test_the_draw_places_pods_on_mig_instances():
    """The random suite above is only worth something if HAMi places many of its pods on MIG."""
    if TOTALS["cases"] == 0:
        pytest.skip("run together with test_random_mig_clusters_match_hami")
    print(f"MIG draw: {TOTALS}")
    assert TOTALS["mig"] >= TOTALS["cases"] // 8, TOTALS
    assert TOTALS["placed"] < TOTALS["cases"], TOTALS


# --- hand-made clusters: what HAMi does, written out ---


def a100(node: str, i: int, **extra: Any) -> dict[str, Any]:
    memory, profiles = mig.MIG_MODELS["NVIDIA-A100-SXM4-40GB"]
    d = {"id": f"GPU-{node}-{i}", "count": 7, "devmem": memory, "devcore": 100, "type": "NVIDIA-A100-SXM4-40GB"}
    d.update(mode="mig", migProfiles=profiles, health=True, index=i, **extra)
    return d


def pod(limits: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return limits_pod(limits, annotations, name="new")


def resident(gpu: str, profile: str, mem: int, core: int, start: int, size: int, mig_annotation: bool = True):
    ann = {
        "hami.io/vgpu-node": "node-a",
        "hami.io/vgpu-devices-allocated": f"{gpu},NVIDIA,{mem},{core}:;",
        "hami.io/vgpu-devices-to-allocate": ";",
    }
    if mig_annotation:
        alloc = {
            "containerIndex": 0,
            "deviceIndex": 0,
            "gpuUUID": gpu,
            "profile": profile,
            "placement": {"start": start, "size": size},
        }
        ann[mig.MIG_KEY] = json.dumps([alloc])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"old-{start}", "namespace": "default", "uid": f"uid-old-{start}", "annotations": ann},
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }


def both(items: list[dict[str, Any]], new: dict[str, Any], gpu_policy: str = "spread") -> tuple[dict, dict]:
    hami = oracle.run(items, new, "binpack", gpu_policy)
    ours = model.engine_explain(items, new, "binpack", gpu_policy, int(time.time()))
    case = {"items": items, "pod": new, "node_policy": "binpack", "gpu_policy": gpu_policy}
    assert model.compare(case, hami, ours, int(time.time())) + mig_diffs(hami, ours) == []
    return hami, ours


def test_smallest_profile_with_the_memory_and_its_placement():
    hami, ours = both(
        [node_with_devices("node-a", [a100("node-a", 0)])], pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000"})
    )
    assert ours["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-node-a-0,NVIDIA,9856,29:;"
    assert json.loads(ours["annotations"][mig.MIG_KEY]) == [
        {
            "containerIndex": 0,
            "deviceIndex": 0,
            "gpuUUID": "GPU-node-a-0",
            "profile": "2g.10gb",
            "placement": {"start": 0, "size": 2},
        }
    ]


def test_one_container_takes_three_instances_of_one_gpu():
    """More instances than the node has GPUs: HAMi skips NodeInsufficientDevice for a MIG request."""
    hami, ours = both(
        [node_with_devices("node-a", [a100("node-a", 0)])], pod({"nvidia.com/gpu": "3", "nvidia.com/gpumem": "4000"})
    )
    starts = [a["placement"]["start"] for a in json.loads(ours["annotations"][mig.MIG_KEY])]
    assert starts == [6, 5, 4], "1g profiles pack from the highest slice"


def test_whole_card_request_finds_no_profile():
    """No gpumem: the request is the card's whole memory, more than any profile has."""
    hami, ours = both(
        [node_with_devices("node-a", [a100("node-a", 0), a100("node-a", 1)])], pod({"nvidia.com/gpu": "1"})
    )
    assert ours["failed"] == {"node-a": "2/2 CardMigTopologyInfeasible"}


def test_resident_instances_occupy_their_placements():
    items = [node_with_devices("node-a", [a100("node-a", 0)]), resident("GPU-node-a-0", "3g.20gb", 19968, 43, 4, 4)]
    hami, ours = both(items, pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "15000"}))
    assert json.loads(ours["annotations"][mig.MIG_KEY])[0]["placement"] == {"start": 0, "size": 4}
    items.append(resident("GPU-node-a-0", "3g.20gb", 19968, 43, 0, 4))
    hami, ours = both(items, pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "15000"}))
    assert ours["failed"] == {"node-a": "1/1 CardInsufficientMemory"}, "the memory check comes first"
    hami, ours = both(items, pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}))
    assert ours["failed"] == {"node-a": "1/1 CardMigTopologyInfeasible"}, "1 GiB left, but no free slice"


def test_a_mig_pod_without_its_reservation_makes_the_gpu_unhealthy():
    items = [
        node_with_devices("node-a", [a100("node-a", 0)]),
        resident("GPU-node-a-0", "1g.5gb", 4864, 15, 6, 1, mig_annotation=False),
    ]
    hami, ours = both(items, pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}))
    assert ours["failed"] == {"node-a": "1/1 CardNotHealth"}


def test_hami_core_mode_annotation_rules_mig_out():
    new = pod({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "1000"}, {"nvidia.com/vgpu-mode": "hami-core"})
    hami, ours = both([node_with_devices("node-a", [a100("node-a", 0)])], new)
    assert ours["failed"] == {"node-a": "NodeInsufficientDevice"}


def test_topology_aware_takes_every_instance_it_can():
    hami, ours = both(
        [node_with_devices("node-a", [a100("node-a", 0), a100("node-a", 1)])],
        pod({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "15000"}),
        gpu_policy="topology-aware",
    )
    assert len(json.loads(ours["annotations"][mig.MIG_KEY])) == 2


def pod_of(containers: list[dict[str, Any]]) -> dict[str, Any]:
    new = pod({})
    new["spec"]["containers"] = containers
    return new


def gpu_container(name: str, gpus: str, mem: str) -> dict[str, Any]:
    return {"name": name, "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus, "nvidia.com/gpumem": mem}}}


def test_container_index_counts_the_entries_hami_writes():
    """A GPU-less sidecar has no entry in the list HAMi writes, so the next container is entry 1."""
    new = pod_of([gpu_container("a", "2", "8000"), {"name": "sidecar", "image": "x"}, gpu_container("b", "1", "15000")])
    hami, ours = both([node_with_devices("node-a", [a100("node-a", 0)])], new)
    got = [(a["containerIndex"], a["deviceIndex"], a["profile"]) for a in json.loads(ours["annotations"][mig.MIG_KEY])]
    assert got == [(0, 0, "2g.10gb"), (0, 1, "2g.10gb"), (1, 0, "3g.20gb")]


def test_instance_cores_add_up_past_the_card():
    """29 + 29 + 43 cores are taken: a fourth instance fails HAMi's core check before the MIG rule."""
    first = pod_of([gpu_container("a", "2", "8000"), gpu_container("b", "1", "15000")])
    hami, ours = both([node_with_devices("node-a", [a100("node-a", 0)])], first)
    held = [{**a, "containerIndex": 0} for a in json.loads(ours["annotations"][mig.MIG_KEY])]
    for i, a in enumerate(held):
        a["deviceIndex"] = i
    old = resident("GPU-node-a-0", "x", 0, 0, 0, 1)
    old["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = ours["annotations"][
        "hami.io/vgpu-devices-allocated"
    ].replace(":;GPU", ":GPU")
    old["metadata"]["annotations"][mig.MIG_KEY] = json.dumps(held)
    hami, ours = both(
        [node_with_devices("node-a", [a100("node-a", 0)]), old],
        pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}),
    )
    assert ours["failed"] == {"node-a": "1/1 CardInsufficientCore"}


@pytest.mark.parametrize("gpu", ["GPU-node-a-0", "GPU-gone"])
def test_an_assigned_pod_without_a_device_list_still_holds_its_instances(gpu):
    old = resident(gpu, "7g.40gb", 0, 0, 0, 8)
    del old["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"]
    plain = {"id": "GPU-t", "index": 1, "count": 10, "devmem": 15360, "devcore": 100, "type": "NVIDIA-Tesla T4"}
    plain.update(mode="hami-core", health=True)
    new = pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}, {"nvidia.com/nouse-gpuuuid": "GPU-t"})
    hami, ours = both([node_with_devices("node-a", [a100("node-a", 0), plain]), old], new)
    reason = "CardMigTopologyInfeasible" if gpu == "GPU-node-a-0" else "CardNotHealth"
    assert ours["failed"] == {"node-a": f"1/2 {reason}, 1/2 CardUuidMismatch"}

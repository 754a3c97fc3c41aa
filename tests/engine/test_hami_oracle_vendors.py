"""hami_fast against HAMi v2.10.0's own code on clusters of every vendor, one vendor at a time.

Each case is a random cluster whose nodes register one vendor family exactly as its device plugin
does, some beside a partner family, and a pod asking that family (tests/hamigen/vendors.py; the
keys and formats with HAMi's file:line are in tests/hamigen/vendor_specs.py). Both sides start from
HAMi's chart device config with Ascend and Iluvatar enabled (tests/hamigen/vendor_oracle.py). The
comparison is test_hami_oracle's: admission, verdict, node among HAMi's best, reasons, float32
scores, every backend's device annotations and extras on the chosen node, and every backend's
devices on every node that fits.

`SUPPORTED` names the families hami_fast schedules; a partner family on a node is drawn from them
only, so a supported family's test involves no other vendor. The others run too, as
`xfail(strict=False)`: HAMI_ORACLE_VENDORS=all runs every family as a plain test (partners drawn from
every family), and HAMI_ORACLE_VENDORS=hygon,amd adds those families to `SUPPORTED` for one run.

HAMI_ORACLE_VENDOR_BATCHES batches of HAMI_ORACLE_BATCH cases per family (CI: 12 x 8, fifteen families;
the long runs with fresh seeds are in docs/compatibility.md); seeded as
test_hami_oracle is (HAMI_ORACLE_SEED=random explores).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hamigen import model, oracle, seeding
from hamigen.renaming import renamed
from hamigen.sgpu import cards_json as sgpu_cards_json
from hamigen.vendor_configs import variant
from hamigen.vendor_oracle import CHART_CONFIG, SKIP_REASON, hami_args, oracle_calls, prepared
from hamigen.vendor_specs import FAMILIES, VENDORS, Backend
from hamigen.vendors import colon_encoded, device_id, vendor_cases
from hypothesis import given, note
from hypothesis import strategies as st
from test_hami_oracle import check_batch, hami_runs

pytestmark = [
    pytest.mark.skipif(oracle.find_oracle() is None, reason=oracle.SKIP_REASON),
    pytest.mark.skipif(not CHART_CONFIG.exists(), reason=SKIP_REASON),
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]

# The vendor families hami_fast schedules today; NVIDIA here runs under the chart's full config.
SUPPORTED: set[str] = {
    "nvidia",
    "hygon",
    "biren",
    "iluvatar",
    "enflame",
    "ascend",
    "amd",
    "vastai",
    "metax",
    "cambricon",
    "mthreads",
    "kunlun",
    "neuron",
    "enflame-drs",
    "metax-sgpu",
}

BATCH = int(os.environ.get("HAMI_ORACLE_BATCH", "8"))
BATCHES = int(os.environ.get("HAMI_ORACLE_VENDOR_BATCHES", "12"))


def enabled() -> set[str]:
    """SUPPORTED, widened by HAMI_ORACLE_VENDORS (`all` or a comma list of families)."""
    wanted = os.environ.get("HAMI_ORACLE_VENDORS", "").strip()
    if wanted == "all":
        return set(VENDORS)
    extra = {v.strip() for v in wanted.split(",") if v.strip()}
    unknown = extra - set(VENDORS)
    if unknown:
        raise pytest.UsageError(f"HAMI_ORACLE_VENDORS: unknown vendor {sorted(unknown)}; known: {', '.join(VENDORS)}")
    return SUPPORTED | extra


ENABLED = enabled()
PARTNERS = tuple(v for v in VENDORS if v in ENABLED)


def family_param(family: str):
    if family in ENABLED:
        return pytest.param(family, id=family)
    reason = f"hami-fast does not schedule {family} yet"
    return pytest.param(family, id=family, marks=pytest.mark.xfail(reason=reason, strict=False))


def batches(family: str) -> st.SearchStrategy:
    partners = PARTNERS if family in ENABLED else VENDORS
    return st.lists(vendor_cases(family, partners).map(prepared), min_size=BATCH, max_size=BATCH)


@pytest.mark.parametrize("family", [family_param(f) for f in VENDORS])
def test_vendor_clusters_match_hami(family):
    @seeding.seeded_batches(BATCHES)
    @given(batches(family))
    def run(batch):
        check_batch(batch)

    run()


# --- HAMi against itself: its randomness is modelled where the suite says it is -----------------

SELF_BATCHES = int(os.environ.get("HAMI_ORACLE_VENDOR_SELF_BATCHES", "3"))


def hami_vs_itself(case: dict[str, Any], runs: list[dict[str, Any]], probe: dict[str, Any]) -> list[str]:
    """What a further HAMi run (`probe`) answers that `model.resolved` of the earlier runs does not
    allow: a case marked deterministic must give the same answer every time (but for node-score
    ties), one marked random an answer among those the reruns saw."""
    dies = model.device_groups(case["items"])
    probe = model.canonical_answer(probe, dies)
    hami = model.resolved([model.canonical_answer(r, dies) for r in runs], probe)
    if (hami.get("error") or "") != (probe.get("error") or ""):
        return [f"error: {hami.get('error')!r} then {probe.get('error')!r}"]
    diffs = []
    if hami["failed"] != probe["failed"]:
        diffs.append(f"failed: {hami['failed']} then {probe['failed']}")
    if {n: model.f32(s) for n, s in hami["scores"].items()} != {n: model.f32(s) for n, s in probe["scores"].items()}:
        diffs.append(f"scores: {hami['scores']} then {probe['scores']}")
    policy = "spread" if model.effective_node_policy(case) == "spread" else "binpack"
    if probe["node"] is not None and probe["node"] not in model.best_nodes(hami["scores"], policy):
        diffs.append(f"node: {probe['node']} not among the best {model.best_nodes(hami['scores'], policy)}")
    if hami["node"] == probe["node"]:
        diffs += model.compare_device_annotations(hami["annotations"], probe["annotations"])
    for field in ("devices", "vendor_devices"):
        for name, value in (probe.get(field) or {}).items():
            if value not in model.options(hami, field, name):
                diffs.append(f"{field} on {name}: {model.options(hami, field, name)} then {value!r}")
    return diffs


@pytest.mark.parametrize("family", VENDORS)
def test_hami_answers_again_as_modelled(family):
    """Every family, supported or not: one more HAMi run of each case agrees with the earlier runs
    as model.resolved reads them (tests/hamigen/vendor_oracle.py: which cases are rerun)."""

    @seeding.seeded_batches(SELF_BATCHES)
    @given(st.lists(vendor_cases(family, VENDORS).map(prepared), min_size=BATCH, max_size=BATCH))
    def run(batch):
        calls = oracle_calls(batch)
        runs = hami_runs(batch, calls)
        probes = oracle.run_many(calls)
        found = [(c, d) for c, r, p in zip(batch, runs, probes, strict=True) if (d := hami_vs_itself(c, r, p))]
        for case, diffs in found[:2]:
            note(json.dumps({"case": case, "diffs": diffs}, sort_keys=True))
        assert not found, f"{seeding.describe()}: HAMi answered again otherwise: {[d for _, d in found][:3]}"

    run()


# --- each backend's registration, as the generator writes it, is one HAMi schedules ------------


def plain_node(b: Backend) -> dict[str, Any]:
    """node-0 with two healthy devices of `b`, registered in the generator's format for `b`."""
    devices = [
        {
            "id": device_id(b, "node-0", i),
            "index": i,
            "count": 4,
            # Ascend's webhook asks memoryAllocatable; a vXPU without memory asks a whole 98304 MiB card.
            "devmem": {"ascend": 65536, "kunlun": 98304}.get(b.family, 32768),
            "devcore": 100,
            "type": b.models[0][0] if b.models else b.common_word,
            "numa": 0,
            "mode": "hami-core",
            "health": True,
        }
        for i in range(2)
    ]
    annotations, status = {}, {b.count: "8"}
    if b.registration == "json":
        annotations[b.register_key] = json.dumps(devices)
    elif b.registration == "sgpu":
        annotations[b.register_key] = sgpu_cards_json(devices)
    elif b.registration == "colon":
        annotations[b.register_key] = colon_encoded(devices, [False, True])
    elif b.registration == "drs":
        listed = [{"index": str(i), "minor": str(i), "capacity": 6} for i in range(2)]
        profiles = {"1g.6gb": "0", "3g.20gb": "1", "6g.40gb": "2"}
        annotations[b.register_key] = json.dumps({"devices": listed, "profiles": profiles})
    elif b.family == "mthreads":
        status = {b.cores: "32", b.memory: "192", b.count: "200"}
    elif b.family == "cambricon":
        status = {b.cores: "200", b.memory: "128", b.count: "200"}
    elif b.family == "neuron":
        status = {b.count: "2", b.cores: "4"}
    else:
        status = {b.count: "2"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-0", "annotations": annotations},
        "status": {"capacity": status, "allocatable": status},
    }


BACKENDS = [pytest.param(b, id=b.common_word) for family in VENDORS for b in FAMILIES[family]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_as_registered_here_is_scheduled_by_hami(backend):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "new", "namespace": "default", "uid": "uid-new"},
        "spec": {"containers": [{"name": "c0", "image": "x", "resources": {"limits": {backend.count: "1"}}}]},
    }
    hami = oracle.run([plain_node(backend)], pod, "binpack", "spread", hami_args=hami_args())
    assert hami["node"] == "node-0", hami
    assert hami["annotations"][backend.allocated].split(",")[0] in {
        device_id(backend, "node-0", i) for i in range(2)
    }, hami
    if backend.family in ENABLED:
        check_batch(
            [prepared({"items": [plain_node(backend)], "pod": pod, "node_policy": "binpack", "gpu_policy": "spread"})]
        )


def mixed_node(hygon: int, nvidia: int) -> dict[str, Any]:
    dcu = "".join(f"dcu-{i},4,32768,100,DCU,0,true,{i},hami-core:" for i in range(hygon))
    gpus = [
        {"id": f"GPU-{i}", "index": i, "count": 4, "devmem": 32768, "devcore": 100, "type": "NVIDIA-T4", "health": True}
        for i in range(nvidia)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "node-0",
            "annotations": {"hami.io/node-dcu-register": dcu, "hami.io/node-nvidia-register": json.dumps(gpus)},
        },
        "status": {"allocatable": {"hygon.com/dcunum": str(4 * hygon), "nvidia.com/gpu": str(4 * nvidia)}},
    }


def test_mixed_node_device_choice_follows_go_map_order():
    """8 Hygon + 8 NVIDIA devices: HAMi lists them in Go's map order of vendors and pdqsort keeps no
    order among equals, so it gives either of two Hygon devices; model.resolved of the reruns takes
    each, and no other device."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"hygon.com/dcunum": "1"}}}]},
    }
    call = dict(items=[mixed_node(8, 8)], pod=pod, node_policy="binpack", gpu_policy="spread", hami_args=hami_args())
    runs = oracle.run_many([call] * 16)
    key = "hami.io/dcu-devices-allocated"
    seen = {r["annotations"][key] for r in runs}
    assert len(seen) == 2, seen  # each of 16 runs picks either: all alike once in 2**15
    for answer in runs[:2]:
        assert (
            model.compare_device_annotations(model.resolved(runs, answer)["annotations"], answer["annotations"]) == []
        )
    stranger = {**runs[0], "annotations": {**runs[0]["annotations"], key: "dcu-3,DCU,32768,100:;"}}
    stranger["annotations"]["hami.io/dcu-devices-to-allocate"] = "dcu-3,DCU,32768,100:;"
    assert model.compare_device_annotations(model.resolved(runs, stranger)["annotations"], stranger["annotations"])
    alone = oracle.run_many([{**call, "items": [mixed_node(6, 6)]}] * 8)
    assert len({r["annotations"][key] for r in alone}) == 1, "12 devices or fewer: insertion sort keeps the order"


# --- the chart's config varied for the vendor: names renamed, Hygon's memoryFactor -------------

CONFIG_BATCHES = int(os.environ.get("HAMI_ORACLE_VENDOR_CONFIG_BATCHES", "10"))


@st.composite
def config_cases(draw, family: str) -> dict[str, Any]:
    case = draw(vendor_cases(family, PARTNERS if family in ENABLED else VENDORS))
    path, names = draw(variant(family))
    return {**prepared(case, path), "items": renamed(case["items"], names), "pod": renamed(case["pod"], names)}


@pytest.mark.parametrize("family", [family_param(f) for f in VENDORS if f != "nvidia"])
def test_vendor_configs_match_hami(family):
    @seeding.seeded_batches(CONFIG_BATCHES)
    @given(st.lists(config_cases(family), min_size=BATCH, max_size=BATCH))
    def run(batch):
        check_batch(batch)

    run()


def test_drs_profile_twins_follow_go_map_order():
    """Two Enflame DRS profiles of equal slices and memory: HAMi sorts its profiles (collected in
    a Go map) by both and takes the first, so either twin, run by run; model.drs_canonical compares
    any twin as all of them, and a profile of other slices or memory as itself."""
    profiles = {"1g.6gb": "0", "3g.20gb": "1", "3G.20GB": "5", "6g.40gb": "2"}
    devices = [{"index": "0", "minor": "0", "capacity": 6}]
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "node-0",
            "annotations": {"enflame.com/gcu-drs-capacity": json.dumps({"devices": devices, "profiles": profiles})},
        },
        "status": {"capacity": {}, "allocatable": {}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"enflame.com/drs-gcu": "3"}}}]},
    }
    call = dict(items=[node], pod=pod, node_policy="binpack", gpu_policy="spread", hami_args=hami_args())
    runs = oracle.run_many([call] * 16)
    assigned = [r["annotations"]["assigned-containers"] for r in runs]
    names = {json.loads(a)["c"]["profileName"] for a in assigned}
    assert names == {"3g.20gb", "3G.20GB"}, names  # each of 16 runs takes either
    groups = model.device_groups([node])
    assert len({model.drs_canonical(a, "node-0", groups) for a in assigned}) == 1
    other = assigned[0].replace('"profileName":"3g.20gb"', '"profileName":"6g.40gb"')
    other = other.replace('"profileName":"3G.20GB"', '"profileName":"6g.40gb"')
    assert model.drs_canonical(other, "node-0", groups) != model.drs_canonical(assigned[0], "node-0", groups)


DRS_PROFILES = {"1g.6gb": "0", "3g.20gb": "1", "6g.40gb": "2"}
DRS_EDGES = {
    "profile-beyond-int32": (
        {"devices": [{"index": "0", "capacity": 6}], "profiles": {"4294967299g.4294967299gb": "0", "1g.6gb": "1"}},
        {"enflame.com/drs-gcu": "1"},
    ),
    "slices-at-int32": (
        {"devices": [{"index": "0", "capacity": 6}], "profiles": {"2147483647g.20gb": "0", "1g.6gb": "1"}},
        {"enflame.com/drs-gcu": "2147483647"},
    ),
    "keys-in-other-case": (
        {"Devices": [{"INDEX": "2", "Minor": "m", "Capacity": " 6 "}], "PROFILES": DRS_PROFILES},
        {"enflame.com/drs-gcu": "3"},
    ),
    "negative-index-fractional-capacity": (
        {"devices": [{"index": "-1", "capacity": 6.9}, {"index": "0", "capacity": 6}], "profiles": DRS_PROFILES},
        {"enflame.com/drs-gcu": "1"},
    ),
    "null-profile-id": (
        {"devices": [{"index": "0", "capacity": 6}], "profiles": {"1g.6gb": None, "6g.40gb": "2"}},
        {"enflame.com/drs-gcu": "1"},
    ),
    "null-device": (
        {"devices": [None, {"index": "1", "capacity": 2}], "profiles": DRS_PROFILES},
        {"enflame.com/drs-gcu": "1"},
    ),
    "memory-in-bytes": (
        {"devices": [{"index": "0", "capacity": 6}], "profiles": DRS_PROFILES},
        {"enflame.com/gcu-memory": "1Gi"},
    ),
    "fractions-round-up": (
        {"devices": [{"index": "0", "capacity": 6}], "profiles": DRS_PROFILES},
        {"enflame.com/gcu-memory": "0.5", "enflame.com/gcu-core": "0.5"},
    ),
}


@pytest.mark.parametrize("name", sorted(DRS_EDGES))
def test_drs_registration_and_request_edges_match_hami(name):
    """Enflame DRS corners the generator draws rarely or not at all, each against HAMi."""
    spec, limits = DRS_EDGES[name]
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-0", "annotations": {"enflame.com/gcu-drs-capacity": json.dumps(spec)}},
        "status": {"capacity": {}, "allocatable": {}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]},
    }
    check_batch([prepared({"items": [node], "pod": pod, "node_policy": "binpack", "gpu_policy": "mutex,binpack"})])

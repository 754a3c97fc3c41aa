"""Hand-checked tests of the Python oracle against literal worked examples of HAMi's rules.

The § marks number the sections of the written reading of HAMi's scheduler the oracle was built
from (not part of this repository).
"""

import json

import pytest
from oracle import hami
from oracle.hami import Device, Entry, Request, Usage
from oracle.objects import container, gpu, node, placed_pod, pod, quota
from oracle.quantity import parse_quantity, quantity_int

V100 = "NVIDIA-Tesla V100-PCIE-32GB"
GPU_0 = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
GPU_1 = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"

EXAMPLE_A = (
    '[{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,"devcore":100,'
    '"type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true},'
    '{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,'
    '"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true}]'
)
EXAMPLE_B = (
    '[{"id":"GPU-7a1c...","index":3,"count":10,"devmem":40960,"devcore":100,'
    '"type":"NVIDIA A100-SXM4-40GB","numa":1,"mode":"hami-core"}]'
)
EXAMPLE_C = (
    '[{"id":"GPU-0","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA-A100-SXM4-40GB","numa":0,'
    '"health":true,"mode":"mig","migProfiles":[{"name":"1g.5gb","memoryMB":5120,"core":14,'
    '"sliceCount":1,"placements":[{"start":6,"size":1}]}]}]'
)


def one_card(devmem=32768, devcore=100):
    return Device(
        pos=0, id="GPU-x", count=10, devmem=devmem, devcore=devcore, type=V100, numa=0, mode="hami-core", health=True
    )


def request_of(limits, requests=None):
    """Request after the webhook defaults, as the scheduler derives it."""
    mutated = hami.apply_webhook_defaults(pod("p", [container("c", limits, requests)]))
    return hami.pod_requests(mutated)[0]


def explain(nodes, new_pod, *, pods=(), quotas=(), now=1705054796, **policies):
    return hami.explain(list(nodes), list(pods), list(quotas), new_pod, now, **policies)


def gpu_pod(name="new", limits=None, **kwargs):
    return pod(name, [container("main", limits)], **kwargs)


# ---------------------------------------------------------------------------------------------
# Quantities (§2.1: plain integers; Kubernetes quantity strings accepted)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3000, 3000),
        ("3000", 3000),
        ("3k", 3000),
        ("1Ki", 1024),
        ("2Mi", 2 * 2**20),
        ("2000m", 2),
        ("1e3", 1000),
        ("1E", 10**18),
        ("+5", 5),
        ("-2", -2),
        ("1.0", 1),
        (".5k", 500),
    ],
)
def test_integer_quantities(value, expected):
    assert quantity_int(value) == expected


@pytest.mark.parametrize("value", ["1.5", "500m", "abc", "", "1 k", "1KI", True, None, "9223372036854775808"])
def test_non_integer_quantities(value):
    assert quantity_int(value) is None


def test_fractional_quantity_is_exact():
    assert parse_quantity("1500m") * 2 == 3


# ---------------------------------------------------------------------------------------------
# §2.2 worked examples (card devmem 32768, devcore 100)


@pytest.mark.parametrize(
    ("limits", "nums", "memreq", "cores"),
    [
        ({"nvidia.com/gpu": 1}, 1, 32768, 100),
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30}, 1, 3000, 30),
        ({"nvidia.com/gpu": 2, "nvidia.com/gpumem-percentage": 50, "nvidia.com/gpucores": 30}, 2, 16384, 30),
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 40}, 1, 13107, 0),
        ({"nvidia.com/gpumem": 3000}, 1, 3000, 0),
    ],
)
def test_request_derivation_table(limits, nums, memreq, cores):
    request = request_of(limits)
    assert request.nums == nums
    assert hami.resolve_memreq(request, one_card()) == memreq
    assert min(request.cores, 100) == cores


def test_webhook_adds_exclusive_cores_to_bare_gpu():
    mutated = hami.apply_webhook_defaults(pod("p", [container("c", {"nvidia.com/gpu": 1})]))
    assert mutated["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 100}


def test_webhook_exclusive_cores_with_full_percentage_or_count_in_requests():
    assert request_of({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 100}).cores == 100
    assert request_of(None, {"nvidia.com/gpu": 2}) == Request(nums=2, mem=0, pct=100, cores=100)
    assert request_of({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 99}).cores == 0
    assert request_of({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 10}).cores == 10


def test_webhook_adds_count_only_for_limits():
    assert request_of({"nvidia.com/gpucores": 20}) == Request(nums=1, mem=0, pct=100, cores=20)
    assert request_of({"nvidia.com/gpumem-percentage": 30}) == Request(nums=1, mem=0, pct=30, cores=0)
    assert request_of(None, {"nvidia.com/gpumem": 3000}) is None


def test_request_fields_read_limits_before_requests():
    request = request_of(
        {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 1000}, {"nvidia.com/gpu": 3, "nvidia.com/gpumem": 5}
    )
    assert (request.nums, request.mem) == (2, 1000)


def test_invalid_memory_drops_the_whole_request():
    assert request_of({"nvidia.com/gpu": 1, "nvidia.com/gpumem": "1.5"}) is None
    assert request_of({"nvidia.com/gpu": 1, "nvidia.com/gpumem": -1}) is None
    assert request_of({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2**31}) is None
    assert request_of({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2**31 - 1}).mem == 2**31 - 1


def test_count_must_be_a_positive_integer():
    assert request_of({"nvidia.com/gpu": "1.5"}) is None
    assert request_of({"nvidia.com/gpu": 0}) is None
    assert request_of({"nvidia.com/gpu": "2000m"}).nums == 2


def test_percentage_clamp_and_ignore():
    assert request_of({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 150}).pct == 100
    assert request_of({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 0}).pct == 100
    # gpumem wins over the percentage on a concrete device
    request = request_of({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpumem-percentage": 50})
    assert hami.resolve_memreq(request, one_card()) == 1000


def test_cores_above_100_are_clamped_in_fit():
    nodes = [node("n", [gpu("GPU-a")])]
    result = explain(nodes, gpu_pod(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100, "nvidia.com/gpucores": 150}))
    assert result["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-a,NVIDIA,100,100:;"


def test_init_containers_come_first():
    p = pod("p", [container("app", {"nvidia.com/gpu": 1})], init_containers=[container("init", {"cpu": "1"})])
    assert [r is None for r in hami.pod_requests(hami.apply_webhook_defaults(p))] == [True, False]


# ---------------------------------------------------------------------------------------------
# §3.2 register examples


def test_register_example_a():
    decoded = hami.decode_node(node("n", register=EXAMPLE_A))
    assert [(d.id, d.count, d.devmem, d.devcore, d.type, d.numa, d.mode, d.health) for d in decoded.devices] == [
        (GPU_0, 10, 32768, 100, V100, 0, "hami-core", True),
        (GPU_1, 10, 32768, 100, V100, 0, "hami-core", True),
    ]


def test_register_example_b_absent_health_is_unhealthy():
    (device,) = hami.decode_node(node("n", register=EXAMPLE_B)).devices
    assert (device.numa, device.health, device.devmem) == (1, False, 40960)


def test_register_example_c_mig_is_rejected_as_type_mismatch():
    nodes = [node("n", register=EXAMPLE_C)]
    result = explain(nodes, gpu_pod(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}))
    assert result["failed"] == {"n": "1/1 CardTypeMismatch"}


@pytest.mark.parametrize("register", [None, "", "[]", "not json", "{}", '[{"id": "GPU-a", "count": "10"}]'])
def test_unregistered_nodes(register):
    nodes = [node("n", register=register) if register is not None else node("n")]
    result = explain(nodes, gpu_pod(limits={"nvidia.com/gpu": 1}))
    assert result["failed"] == {"n": "node unregistered"}
    assert result["node"] is None


def test_invalid_pair_scores_unregister_the_node():
    nodes = [node("n", [gpu("GPU-a")], annotations={"hami.io/node-nvidia-score": "{{"})]
    assert explain(nodes, gpu_pod(limits={"nvidia.com/gpu": 1}))["failed"] == {"n": "node unregistered"}


# ---------------------------------------------------------------------------------------------
# §4.2 encoding examples


@pytest.mark.parametrize(
    "value",
    [
        "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,30:;",
        "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,0:;GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,5000,0:;",
        "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec,NVIDIA,16384,30:GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,16384,30:;",
        "GPU-init1,NVIDIA,500,10:;GPU-main1,NVIDIA,2000,50:;",
        ";;GPU-main1,NVIDIA,2000,50:;",
    ],
)
def test_encoding_round_trip(value):
    slots = hami.decode_pod_devices(value)
    assert slots[-1] == []  # the element after the last ';'
    assert hami.encode_pod_devices(slots[:-1]) == value


def test_decode_example_4():
    assert hami.decode_pod_devices("GPU-init1,NVIDIA,500,10:;GPU-main1,NVIDIA,2000,50:;") == [
        [Entry("GPU-init1", 500, 10)],
        [Entry("GPU-main1", 2000, 50)],
        [],
    ]
    assert hami.decode_pod_devices(";;GPU-main1,NVIDIA,2000,50:;") == [[], [], [Entry("GPU-main1", 2000, 50)], []]


def test_decode_rejects_short_or_non_integer_entries():
    assert hami.decode_pod_devices("GPU-a,NVIDIA,3000:;") is None
    assert hami.decode_pod_devices("GPU-a,NVIDIA,3000,x:;") is None
    assert hami.decode_pod_devices("GPU-a,NVIDIA,3000,1,extra:;") == [[Entry("GPU-a", 3000, 1)], []]


def example_a_node():
    return node("node67-4v100", register=EXAMPLE_A)


def test_allocation_example_1():
    result = explain(
        [example_a_node()], gpu_pod(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30})
    )
    assert result == {
        "node": "node67-4v100",
        "annotations": {
            "hami.io/vgpu-node": "node67-4v100",
            "hami.io/vgpu-time": "1705054796",
            "hami.io/vgpu-devices-to-allocate": f"{GPU_1},NVIDIA,3000,30:;",
            "hami.io/vgpu-devices-allocated": f"{GPU_1},NVIDIA,3000,30:;",
        },
        "failed": {},
        "scores": {"node67-4v100": 0.0},
        "error": "",
    }


def test_allocation_example_2_two_containers_share_one_gpu_under_gpu_binpack():
    p = pod(
        "p",
        [
            container("a", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}),
            container("b", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 5000}),
        ],
    )
    result = explain([example_a_node()], p, gpu_policy="binpack")
    assert result["annotations"]["hami.io/vgpu-devices-allocated"] == f"{GPU_1},NVIDIA,3000,0:;{GPU_1},NVIDIA,5000,0:;"
    # under the default GPU spread the second container takes the emptier card
    spread = explain([example_a_node()], p)
    assert spread["annotations"]["hami.io/vgpu-devices-allocated"] == f"{GPU_1},NVIDIA,3000,0:;{GPU_0},NVIDIA,5000,0:;"


def test_allocation_example_3_two_gpus_at_half_memory():
    limits = {"nvidia.com/gpu": 2, "nvidia.com/gpumem-percentage": 50, "nvidia.com/gpucores": 30}
    result = explain([example_a_node()], gpu_pod(limits=limits))
    # Fit walks from the end of the list: the card registered last comes first.
    assert (
        result["annotations"]["hami.io/vgpu-devices-allocated"] == f"{GPU_1},NVIDIA,16384,30:{GPU_0},NVIDIA,16384,30:;"
    )
    reversed_register = json.dumps(list(reversed(json.loads(EXAMPLE_A))))
    result = explain([node("node67-4v100", register=reversed_register)], gpu_pod(limits=limits))
    assert (
        result["annotations"]["hami.io/vgpu-devices-allocated"] == f"{GPU_0},NVIDIA,16384,30:{GPU_1},NVIDIA,16384,30:;"
    )


def test_allocation_example_4_init_and_app_container():
    nodes = [node("n", [gpu("GPU-main1")])]
    p = pod(
        "p",
        [container("main", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000, "nvidia.com/gpucores": 50})],
        init_containers=[container("init", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 500, "nvidia.com/gpucores": 10})],
    )
    result = explain(nodes, p)
    assert (
        result["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-main1,NVIDIA,500,10:;GPU-main1,NVIDIA,2000,50:;"
    )


def test_allocation_positional_empty_slots():
    nodes = [node("n", [gpu("GPU-main1")])]
    p = pod(
        "p",
        [
            container("side", {"cpu": "1"}),
            container("main", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000, "nvidia.com/gpucores": 50}),
        ],
        init_containers=[container("init", {"cpu": "1"})],
    )
    assert explain(nodes, p)["annotations"]["hami.io/vgpu-devices-allocated"] == ";;GPU-main1,NVIDIA,2000,50:;"


def test_allocation_example_5_bare_gpu_is_exclusive():
    result = explain([node("n", [gpu("GPU-x")])], gpu_pod(limits={"nvidia.com/gpu": 1}))
    assert result["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-x,NVIDIA,32768,100:;"


# ---------------------------------------------------------------------------------------------
# §4.3 usage reconstruction


def test_collapse_init_peak_and_app_sums():
    slots = [
        [Entry("A", 500, 10)],
        [Entry("A", 800, 5), Entry("B", 100, 0)],
        [Entry("A", 200, 20)],
        [Entry("A", 300, 30)],
        [],
    ]
    assert hami.collapse(slots, n_init=2) == {
        "A": Usage(used=2, mem=800, cores=50),
        "B": Usage(used=1, mem=100, cores=0),
    }


def test_collapse_after_init_release_keeps_app_only():
    slots = [[Entry("A", 5000, 10), Entry("B", 100, 0)], [Entry("A", 200, 20)], [Entry("A", 300, 30)]]
    assert hami.collapse(slots, n_init=1, init_released=True) == {"A": Usage(used=2, mem=500, cores=50)}
    assert hami.collapse(slots, n_init=1) == {
        "A": Usage(used=2, mem=5000, cores=50),
        "B": Usage(used=1, mem=100, cores=0),
    }


def two_card_node():
    return node("n", [gpu("GPU-a", devmem=10000), gpu("GPU-b", index=1, devmem=10000)])


def test_existing_pod_usage_counts_and_terminal_pods_do_not():
    running = placed_pod("old", "n", "GPU-a,NVIDIA,9000,10:;", [container("c")], phase="Running")
    finished = placed_pod("done", "n", "GPU-b,NVIDIA,9000,10:;", [container("c")], phase="Succeeded")
    p = gpu_pod(limits={"nvidia.com/gpu": 2, "nvidia.com/gpumem": 2000})
    result = explain([two_card_node()], p, pods=[running, finished])
    assert result["failed"] == {"n": "1/2 AllocatedCardsInsufficientRequest, 1/2 CardInsufficientMemory"}


def test_init_release_frees_the_init_peak():
    old = placed_pod(
        "old",
        "n",
        "GPU-a,NVIDIA,9000,10:;GPU-a,NVIDIA,1000,10:;",
        [container("c")],
        init_containers=[container("i")],
        init_statuses=[0],
        phase="Running",
    )
    p = gpu_pod(
        limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 5000}, annotations={"nvidia.com/use-gpuuuid": "GPU-a"}
    )
    assert explain([two_card_node()], p, pods=[old])["node"] == "n"
    old["status"]["initContainerStatuses"][0]["state"] = {"terminated": {"exitCode": 1}}
    assert explain([two_card_node()], p, pods=[old])["failed"] == {
        "n": "1/2 CardInsufficientMemory, 1/2 CardUuidMismatch"
    }


def test_same_uid_releases_previous_reservation():
    old = placed_pod(
        "new", "n", "GPU-a,NVIDIA,10000,0:;GPU-b,NVIDIA,10000,0:;", [container("c"), container("d")], uid="uid-same"
    )
    p = gpu_pod(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10000}, uid="uid-same")
    assert explain([two_card_node()], p, pods=[old])["node"] == "n"
    other = gpu_pod(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10000}, uid="uid-other")
    assert explain([two_card_node()], other, pods=[old])["failed"] == {"n": "2/2 CardInsufficientMemory"}


def test_unknown_uuid_in_allocation_is_ignored():
    old = placed_pod("old", "n", "GPU-zzz,NVIDIA,10000,100:;", [container("c")])
    result = explain([two_card_node()], gpu_pod(limits={"nvidia.com/gpu": 2}), pods=[old])
    assert result["node"] == "n" and result["scores"] == {"n": 0.0}


# ---------------------------------------------------------------------------------------------
# §9.1a worked example


def example_9_1a():
    def v100(uuid, index):
        return gpu(uuid, index=index, count=10, devmem=32768, devcore=100, type=V100)

    nodes = [
        node("node-a", [v100("GPU-a0", 0), v100("GPU-a1", 1)]),
        node("node-b", [v100("GPU-b0", 0), v100("GPU-b1", 1)]),
    ]
    existing = placed_pod("old", "node-a", "GPU-a0,NVIDIA,3000,30:;", [container("c")], phase="Running")
    new = gpu_pod(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000, "nvidia.com/gpucores": 20})
    return nodes, existing, new


def test_worked_example_9_1a():
    nodes, existing, new = example_9_1a()
    result = explain(nodes, new, pods=[existing], now=1705054796)
    assert result == {
        "node": "node-a",
        "annotations": {
            "hami.io/vgpu-node": "node-a",
            "hami.io/vgpu-time": "1705054796",
            "hami.io/vgpu-devices-to-allocate": "GPU-a1,NVIDIA,4000,20:;",
            "hami.io/vgpu-devices-allocated": "GPU-a1,NVIDIA,4000,20:;",
        },
        "failed": {},
        "scores": {"node-a": 10.0 * (1 / 20 + 30 / 200 + 3000 / 65536), "node-b": 0.0},
        "error": "",
    }
    assert f"{result['scores']['node-a']:.2f}" == "2.46"


def test_worked_example_9_1a_variants():
    nodes, existing, new = example_9_1a()
    binpack = explain(nodes, new, pods=[existing], gpu_policy="binpack")
    assert binpack["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-a0,NVIDIA,4000,20:;"
    assert explain(nodes, new, pods=[existing], node_policy="spread")["node"] == "node-b"
    new["metadata"]["annotations"]["hami.io/node-scheduler-policy"] = "spread"
    assert explain(nodes, new, pods=[existing])["node"] == "node-b"


def test_worked_example_9_1a_device_scores():
    nodes, existing, new = example_9_1a()
    node_a = hami.decode_node(nodes[0])
    usage = hami.node_usage(node_a, list(hami.counted_pods([existing], None)))
    request = hami.pod_requests(hami.apply_webhook_defaults(new))[0]
    scores = [hami.device_score(d, usage[d.pos], request, (1, 1, 1)) for d in node_a.devices]
    assert [f"{s:.2f}" for s in scores] == ["4.92", "0.00"]


# ---------------------------------------------------------------------------------------------
# §10 formulas


def device(type="NVIDIA-Tesla T4", count=10, devmem=16000, devcore=100, numa=0, pos=0, uuid="GPU-d"):
    return Device(
        pos=pos,
        id=uuid,
        count=count,
        devmem=devmem,
        devcore=devcore,
        type=type,
        numa=numa,
        mode="hami-core",
        health=True,
    )


def test_device_score_example_10_1():
    usage = Usage(used=2, mem=4000, cores=30)
    request = Request(nums=1, mem=2000, pct=hami.PCT_UNSET, cores=20)
    assert hami.device_score(device(), usage, request, (1, 1, 1)) == pytest.approx(7.5)
    assert hami.device_score(device(type="NVIDIA"), usage, request, (1, 1, 1)) == pytest.approx(11.75)


def test_device_score_percentage_term_and_zero_totals():
    request = Request(nums=1, mem=0, pct=50, cores=0)
    assert hami.device_score(device(type="NVIDIA"), Usage(), request, (0, 0, 1)) == 5.0
    assert hami.device_score(device(count=0), Usage(used=3), request, (1, 1, 1)) == 0.0


def test_device_ordering_doc_example():
    # scheduler-policy.md: GPU1 6.75, GPU2 17.75 (slot term weighted 0, types match the request)
    devices = [gpu("GPU1", devmem=8000, type="NVIDIA"), gpu("GPU2", index=1, devmem=8000, type="NVIDIA")]
    existing = placed_pod("old", "n", "GPU1,NVIDIA,2000,10:;GPU2,NVIDIA,6000,70:;", [container("a"), container("b")])
    weights = {"hami.io/device-scoring-weights": "slot=0,core=1,memory=1"}
    new = gpu_pod(
        limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 20}, annotations=weights
    )
    node_n = hami.decode_node(node("n", devices))
    usage = hami.node_usage(node_n, list(hami.counted_pods([existing], None)))
    request = hami.pod_requests(new)[0]
    assert [hami.device_score(d, usage[d.pos], request, (0, 1, 1)) for d in node_n.devices] == pytest.approx(
        [6.75, 17.75]
    )
    binpack = explain([node("n", devices)], new, pods=[existing], gpu_policy="binpack")
    spread = explain([node("n", devices)], new, pods=[existing], gpu_policy="spread")
    assert binpack["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU2,NVIDIA,1000,20:;"
    assert spread["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU1,NVIDIA,1000,20:;"


def test_node_score_example_10_3():
    n = hami.decode_node(node("n", [gpu("A", devmem=16000), gpu("B", devmem=16000)]))
    usage = [Usage(used=2, mem=5000, cores=20), Usage(used=1, mem=3000, cores=30)]
    assert hami.node_score(n, usage) == pytest.approx(6.5)
    assert hami.node_score(n, usage) == 10.0 * (3 / 20 + 50 / 200 + 8000 / 32000)


def test_node_score_zero_totals():
    n = hami.decode_node(node("n", [gpu("A", devcore=0)]))
    assert hami.node_score(n, [Usage(used=1, mem=1, cores=0)]) == 0.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, (1, 1, 1)),
        ("slot=1,core=2,memory=3", (1, 2, 3)),
        ("memory=0,slot=0,core=5", (0, 5, 0)),
        (" slot = 1, core=+2 ,memory=3 ", (1, 2, 3)),
    ],
)
def test_weights(value, expected):
    assert hami.parse_weights(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "",
        "slot=1,core=1",
        "slot=0,core=0,memory=0",
        "slot=-1,core=1,memory=1",
        "slot=1,core=1,memory=x",
        "slot=1,core=1,memory=1,gpu=1",
        "slot=1,slot=1,core=1",
        "slot1,core=1,memory=1",
        "slot=1,core=1,memory=1,",
        "slot=1 2,core=1,memory=1",
    ],
)
def test_invalid_weights(value):
    assert hami.parse_weights(value) is None
    new = gpu_pod(limits={"nvidia.com/gpu": 1}, annotations={"hami.io/device-scoring-weights": value})
    result = explain([node("n", [gpu("GPU-a")])], new)
    assert result["error"] and result["node"] is None and result["failed"] == {}


def test_pod_without_request_is_an_error():
    result = explain([node("n", [gpu("GPU-a")])], pod("p", [container("c", {"cpu": "1"})]))
    assert result["error"] and result == {**result, "node": None, "annotations": {}, "failed": {}, "scores": {}}


# ---------------------------------------------------------------------------------------------
# §10.2 device ordering


def ordered(policy, numa_bind, devices, scores, used=None):
    """Register positions in sort order for given per-device scores."""
    key = hami.sort_key(policy, numa_bind)
    used = used or [0] * len(devices)
    return [d.pos for d in sorted(devices, key=lambda d: key(scores[d.pos], d.numa, used[d.pos]))]


NUMA_DEVICES = [device(pos=0, numa=1), device(pos=1, numa=0), device(pos=2, numa=1), device(pos=3, numa=0)]
SCORES = [3.0, 1.0, 1.0, 2.0]


@pytest.mark.parametrize(
    ("policy", "numa_bind", "expected"),
    [
        ("binpack", False, [1, 2, 3, 0]),  # score asc, tie numa asc
        ("spread", False, [0, 3, 1, 2]),  # score desc, tie numa asc
        ("topology-aware", False, [0, 3, 1, 2]),
        ("whatever", False, [0, 3, 1, 2]),
        ("binpack", True, [2, 0, 1, 3]),  # numa desc, score asc
        ("spread", True, [3, 1, 0, 2]),  # numa asc, score desc
        ("numa", False, [1, 3, 0, 2]),  # numa asc, then register order
        ("numa,binpack", False, [1, 3, 2, 0]),
        ("binpack,numa", False, [1, 2, 3, 0]),
        ("spread,numa", True, [3, 1, 0, 2]),  # numa forced first
        ("binpack,mutex", True, [1, 3, 2, 0]),
        ("mutex,topology-aware", False, [0, 3, 1, 2]),  # no sort keys => spread
    ],
)
def test_sort_orders(policy, numa_bind, expected):
    assert ordered(policy, numa_bind, NUMA_DEVICES, SCORES) == expected


def test_mutex_orders_by_used_then_numa_and_ignores_numa_bind():
    assert ordered("mutex", True, NUMA_DEVICES, SCORES, used=[0, 2, 1, 0]) == [1, 2, 3, 0]


def test_chain_keys():
    assert hami.chain_keys("binpack,numa,binpack", False) == ["binpack", "numa"]
    assert hami.chain_keys("binpack,numa", True) == ["numa", "binpack"]
    assert hami.chain_keys("mutex,", False) == ["spread"]
    assert hami.chain_keys("mutex,", True) == ["numa", "spread"]


def test_equal_devices_last_registered_is_tried_first():
    devices = [gpu(f"GPU-{i}", index=i) for i in range(5)]
    result = explain([node("n", devices)], gpu_pod(limits={"nvidia.com/gpu": 2, "nvidia.com/gpumem": 10}))
    assert result["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-4,NVIDIA,10,0:GPU-3,NVIDIA,10,0:;"


# ---------------------------------------------------------------------------------------------
# §9.4 Fit checks and reasons


def test_reason_format_example():
    assert hami.gen_reason({"CardTimeSlicingExhausted": 3, "CardInsufficientMemory": 1}, 4) == (
        "1/4 CardInsufficientMemory, 3/4 CardTimeSlicingExhausted"
    )


def test_reason_example_end_to_end():
    devices = [gpu(f"GPU-{i}", index=i, count=1, devmem=8000) for i in range(4)]
    existing = placed_pod(
        "old",
        "n",
        "GPU-0,NVIDIA,100,0:;GPU-1,NVIDIA,100,0:;GPU-2,NVIDIA,100,0:;",
        [container("a"), container("b"), container("c")],
    )
    new = gpu_pod(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 9000})
    assert explain([node("n", devices)], new, pods=[existing])["failed"] == {
        "n": "1/4 CardInsufficientMemory, 3/4 CardTimeSlicingExhausted"
    }


def test_reason_sorting_is_by_string():
    assert hami.gen_reason({"B": 10, "A": 9}, 12) == "10/12 B, 9/12 A"


def test_node_insufficient_device_counts_nvidia_types_only():
    devices = [gpu("GPU-a"), gpu("GPU-b", type="Tesla T4")]
    result = explain([node("n", devices)], gpu_pod(limits={"nvidia.com/gpu": 2}))
    assert result["failed"] == {"n": "NodeInsufficientDevice"}
    result = explain(
        [node("n", devices)], gpu_pod(limits={"nvidia.com/gpu": 1}, annotations={"nvidia.com/use-gpuuuid": "GPU-b"})
    )
    assert result["failed"] == {"n": "1/1 CardUuidMismatch"}


def test_checks_in_order_health_cordon_type():
    devices = [
        gpu("GPU-0", health=False),
        gpu("GPU-1", index=1, type="NVIDIA A100"),
        gpu("GPU-2", index=2),
        gpu("GPU-3", index=3, mode="mps"),
    ]
    annotations = {"hami.io/device-cordon": "GPU-0, GPU-2", "hami.io/node-nvidia-register": json.dumps(devices)}
    n = node("n", annotations=annotations)
    new = gpu_pod(
        limits={"nvidia.com/gpu": 1},
        annotations={"nvidia.com/use-gputype": "v100", "nvidia.com/vgpu-mode": "hami-core"},
    )
    assert explain([n], new)["failed"] == {"n": "1/4 CardCordoned, 1/4 CardNotHealth, 2/4 CardTypeMismatch"}


@pytest.mark.parametrize(
    ("annotations", "allowed"),
    [
        ({"nvidia.com/use-gputype": "a100, V100"}, ["A", "V"]),
        ({"nvidia.com/use-gputype": ""}, ["A", "V", "T"]),
        ({"nvidia.com/use-gputype": ","}, ["A", "V", "T"]),
        ({"nvidia.com/nouse-gputype": "t4,"}, ["A", "V"]),
        ({"nvidia.com/use-gpuuuid": " V , T"}, ["V", "T"]),
        ({"nvidia.com/nouse-gpuuuid": "A"}, ["V", "T"]),
        ({"nvidia.com/vgpu-mode": "hami-core,mps"}, ["A", "V", "T"]),
        ({"nvidia.com/vgpu-mode": "mps"}, ["T"]),
    ],
)
def test_hint_annotations(annotations, allowed):
    devices = [
        gpu("A", type="NVIDIA A100"),
        gpu("V", index=1, type=V100),
        gpu("T", index=2, type="NVIDIA-Tesla T4", mode="mps"),
    ]
    fits = explain([node("n", devices)], gpu_pod(limits={"nvidia.com/gpu": len(allowed)}, annotations=annotations))
    taken = hami.decode_pod_devices(fits["annotations"]["hami.io/vgpu-devices-allocated"])[0]
    assert sorted(e.uuid for e in taken) == sorted(allowed)
    if len(allowed) < 3:
        too_many = explain(
            [node("n", devices)], gpu_pod(limits={"nvidia.com/gpu": len(allowed) + 1}, annotations=annotations)
        )
        assert f"{len(allowed)}/3 AllocatedCardsInsufficientRequest" in too_many["failed"]["n"].split(", ")


def test_mutex_rejects_used_cards():
    existing = placed_pod("old", "n", "GPU-a,NVIDIA,100,0:;", [container("c")])
    new = gpu_pod(
        limits={"nvidia.com/gpu": 2, "nvidia.com/gpumem": 100},
        annotations={"hami.io/gpu-scheduler-policy": "binpack,mutex"},
    )
    assert explain([two_card_node()], new, pods=[existing])["failed"] == {
        "n": "1/2 AllocatedCardsInsufficientRequest, 1/2 ExclusiveDeviceAllocateConflict"
    }


def test_exclusive_request_on_shared_card_and_exhausted_cores():
    existing = placed_pod("old", "n", "GPU-a,NVIDIA,100,0:;GPU-b,NVIDIA,100,100:;", [container("c"), container("d")])
    whole_card = gpu_pod(limits={"nvidia.com/gpu": 1})
    assert explain([two_card_node()], whole_card, pods=[existing])["failed"] == {"n": "2/2 CardInsufficientMemory"}
    full_cores = gpu_pod(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100, "nvidia.com/gpucores": 100})
    assert explain([two_card_node()], full_cores, pods=[existing])["failed"] == {
        "n": "1/2 CardInsufficientCore, 1/2 ExclusiveDeviceAllocateConflict"
    }
    zero_core = gpu_pod(
        limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100}, annotations={"nvidia.com/use-gpuuuid": "GPU-b"}
    )
    assert explain([two_card_node()], zero_core, pods=[existing])["failed"] == {
        "n": "1/2 CardComputeUnitsExhausted, 1/2 CardUuidMismatch"
    }


def test_numa_bind_needs_one_numa_group():
    devices = [
        gpu("GPU-0", numa=0),
        gpu("GPU-1", index=1, numa=0),
        gpu("GPU-2", index=2, numa=1),
        gpu("GPU-3", index=3, numa=1),
    ]
    existing = placed_pod("old", "n", "GPU-3,NVIDIA,32768,0:;", [container("c")])
    limits = {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 100}
    free = explain([node("n", devices)], gpu_pod(limits=limits), pods=[existing])
    # spread: [GPU-3 (busiest), GPU-0, GPU-1, GPU-2] walked from the end
    assert free["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-2,NVIDIA,100,0:GPU-1,NVIDIA,100,0:;"
    bound = explain(
        [node("n", devices)], gpu_pod(limits=limits, annotations={"nvidia.com/numa-bind": "true"}), pods=[existing]
    )
    # numa-bind spread: [GPU-0, GPU-1 | GPU-3, GPU-2]; NUMA 1 has only GPU-2 free, so NUMA 0 is used
    assert bound["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-1,NVIDIA,100,0:GPU-0,NVIDIA,100,0:;"


def test_numa_not_fit_reason():
    devices = [gpu("GPU-0", numa=0), gpu("GPU-1", index=1, numa=1)]
    new = gpu_pod(limits={"nvidia.com/gpu": 2, "nvidia.com/gpumem": 100}, annotations={"nvidia.com/numa-bind": "True"})
    assert explain([node("n", devices)], new)["failed"] == {
        "n": "1/2 AllocatedCardsInsufficientRequest, 1/2 NumaNotFit"
    }
    new["metadata"]["annotations"]["nvidia.com/numa-bind"] = "yes"  # not a Go bool => off
    assert explain([node("n", devices)], new)["node"] == "n"


# ---------------------------------------------------------------------------------------------
# §9.4 topology-aware


def topology_node(scores):
    devices = [gpu(f"G{i}", index=i) for i in range(4)]
    pairs = [
        {"uuid": f"G{i}", "score": {f"G{j}": scores.get(frozenset((i, j)), 0) for j in range(4) if j != i}}
        for i in range(4)
    ]
    return node("n", devices, annotations={"hami.io/node-nvidia-score": json.dumps(pairs)})


def test_topology_single_card_takes_least_connected():
    n = topology_node({frozenset((0, 1)): 100, frozenset((1, 2)): 100, frozenset((2, 3)): 10, frozenset((0, 3)): 10})
    new = gpu_pod(
        limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100},
        annotations={"hami.io/gpu-scheduler-policy": "topology-aware"},
    )
    # link sums: G0 110, G1 200, G2 110, G3 20
    assert explain([n], new)["annotations"]["hami.io/vgpu-devices-allocated"] == "G3,NVIDIA,100,0:;"


def test_topology_multi_card_takes_best_connected_combination():
    n = topology_node({frozenset((0, 1)): 100, frozenset((2, 3)): 300, frozenset((0, 2)): 50})
    new = gpu_pod(
        limits={"nvidia.com/gpu": 2, "nvidia.com/gpumem": 100},
        annotations={"hami.io/gpu-scheduler-policy": "topology-aware"},
    )
    assert explain([n], new)["annotations"]["hami.io/vgpu-devices-allocated"] == "G3,NVIDIA,100,0:G2,NVIDIA,100,0:;"


def test_topology_ties_keep_walk_order_and_missing_scores_count_zero():
    n = node("n", [gpu(f"G{i}", index=i) for i in range(3)])
    new = gpu_pod(limits={"nvidia.com/gpu": 2, "nvidia.com/gpumem": 100})
    result = explain([n], new, gpu_policy="topology-aware")
    assert result["annotations"]["hami.io/vgpu-devices-allocated"] == "G2,NVIDIA,100,0:G1,NVIDIA,100,0:;"


def test_topology_without_enough_cards():
    existing = placed_pod("old", "n", "GPU-a,NVIDIA,10000,0:;", [container("c")])
    new = gpu_pod(limits={"nvidia.com/gpu": 2, "nvidia.com/gpumem": 100})
    assert explain([two_card_node()], new, pods=[existing], gpu_policy="topology-aware")["failed"] == {
        "n": "1/2 AllocatedCardsInsufficientRequest, 1/2 CardInsufficientMemory"
    }


# ---------------------------------------------------------------------------------------------
# §13 quotas


def test_quota_blocks_memory_over_the_namespace_limit():
    quotas = [quota("q", "team", {"limits.nvidia.com/gpumem": "12000", "limits.nvidia.com/gpucores": 1000})]
    existing = placed_pod("old", "n", "GPU-a,NVIDIA,4000,0:;", [container("c")], namespace="team")
    ok = gpu_pod(limits={"nvidia.com/gpu": 2, "nvidia.com/gpumem": 4000}, namespace="team")
    assert explain([two_card_node()], ok, pods=[existing], quotas=quotas)["node"] == "n"
    too_big = gpu_pod(limits={"nvidia.com/gpu": 2, "nvidia.com/gpumem": 4001}, namespace="team")
    # the first card fits (4000 + 4001 <= 12000), the second would make 12002
    assert explain([two_card_node()], too_big, pods=[existing], quotas=quotas)["failed"] == {
        "n": "1/2 AllocatedCardsInsufficientRequest, 1/2 ResourceQuotaNotFit"
    }
    elsewhere = gpu_pod(limits={"nvidia.com/gpu": 2, "nvidia.com/gpumem": 5000}, namespace="other")
    assert explain([two_card_node()], elsewhere, pods=[existing], quotas=quotas)["node"] == "n"


def test_quota_collapses_init_and_app_containers():
    quotas = [quota("q", "default", {"limits.nvidia.com/gpucores": 60})]
    p = pod(
        "p",
        [container("a", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100, "nvidia.com/gpucores": 30})],
        init_containers=[container("i", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100, "nvidia.com/gpucores": 60})],
    )
    # init peak 60 on one card + app 30 elsewhere would be 90; on the same card max(60, 30) = 60
    result = explain([two_card_node()], p, quotas=quotas, gpu_policy="binpack")
    assert result["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-b,NVIDIA,100,60:;GPU-b,NVIDIA,100,30:;"
    spread = explain([two_card_node()], p, quotas=quotas, gpu_policy="spread")
    assert spread["annotations"]["hami.io/vgpu-devices-allocated"] == "GPU-b,NVIDIA,100,60:;GPU-b,NVIDIA,100,30:;"


def test_several_quotas_in_a_namespace_the_smallest_limit_applies():
    quotas = [
        quota("big", "default", {"limits.nvidia.com/gpumem": 50000}),
        quota("small", "default", {"limits.nvidia.com/gpumem": 1000, "limits.nvidia.com/gpucores": 500}),
    ]
    new = gpu_pod(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 2000})
    assert explain([two_card_node()], new, quotas=quotas)["failed"] == {"n": "2/2 ResourceQuotaNotFit"}
    assert explain([two_card_node()], new, quotas=quotas[::-1])["failed"] == {"n": "2/2 ResourceQuotaNotFit"}
    assert hami.quota_limits(quotas, "default") == {"mem": 1000, "cores": 500}


def test_quota_zero_limit_and_non_integer_limit():
    blocked = [quota("q", "default", {"limits.nvidia.com/gpumem": 0})]
    new = gpu_pod(limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1})
    assert explain([two_card_node()], new, quotas=blocked)["failed"] == {"n": "2/2 ResourceQuotaNotFit"}
    ignored = [quota("q", "default", {"limits.nvidia.com/gpumem": "0.5", "limits.nvidia.com/gpu": 0})]
    assert explain([two_card_node()], new, quotas=ignored)["node"] == "n"


# ---------------------------------------------------------------------------------------------
# node choice


def test_node_ties_pick_smallest_name_and_failed_nodes_are_reported():
    nodes = [node("b", [gpu("GPU-b")]), node("a", [gpu("GPU-a")]), node("c")]
    result = explain(nodes, gpu_pod(limits={"nvidia.com/gpu": 1}))
    assert result["node"] == "a" and result["scores"] == {"a": 0.0, "b": 0.0}
    assert result["failed"] == {"c": "node unregistered"}
    assert explain(nodes, gpu_pod(limits={"nvidia.com/gpu": 1}), node_policy="spread")["node"] == "a"


def test_no_fit_has_no_error_and_no_annotations():
    result = explain([node("n", [gpu("GPU-a", health=False)])], gpu_pod(limits={"nvidia.com/gpu": 1}))
    assert result == {"node": None, "annotations": {}, "failed": {"n": "1/1 CardNotHealth"}, "scores": {}, "error": ""}


def test_init_container_failure_is_reported_first():
    p = pod(
        "p",
        [container("a", {"nvidia.com/gpu": 3})],
        init_containers=[container("i", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 99999})],
    )
    assert explain([two_card_node()], p)["failed"] == {"n": "2/2 CardInsufficientMemory"}


def test_init_containers_do_not_accumulate_but_app_containers_do():
    inits = [container(f"i{k}", {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 9000}) for k in range(3)]
    p = pod("p", [container("a", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 6000})], init_containers=inits)
    assert explain([two_card_node()], p)["node"] == "n"
    apps = [container(f"a{k}", {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 6000}) for k in range(2)]
    assert explain([two_card_node()], pod("q", apps))["failed"] == {"n": "2/2 CardInsufficientMemory"}

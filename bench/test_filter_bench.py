"""Filter cost, side by side in one run: the Rust engine vs a HAMi-style Python implementation (the oracle).

The oracle rebuilds per-device usage from all pods on every call, as HAMi's Filter does; the engine keeps
usage incrementally. Same inputs, same answers (the differential tests prove it), different cost.
"""

from __future__ import annotations

import orjson
import pytest

import oracle
from clusters import build, engine_with
from k8s_objects import gpu_pod

NOW = 1_800_000_000


@pytest.fixture(scope="module")
def medium():
    nodes, pods = build(nodes=1000, pods=5000)
    return nodes, pods, engine_with(nodes, pods)


@pytest.fixture(scope="module")
def large():
    nodes, pods = build(nodes=5000, pods=25000, seed=2)
    return nodes, pods, engine_with(nodes, pods)


def new_pod() -> dict:
    return gpu_pod("incoming", namespace="bench", gpu=1, mem=12000, cores=25)


@pytest.mark.benchmark(group="filter 1000 nodes x 8 GPUs, 5000 pods, all nodes candidate")
def test_engine_filter_1000(benchmark, medium) -> None:
    nodes, _, cluster = medium
    body = orjson.dumps({"Pod": new_pod(), "NodeNames": [n["metadata"]["name"] for n in nodes]})
    response, _ = benchmark(cluster.filter, body, NOW, False)
    assert len(orjson.loads(response)["NodeNames"]) == 1


@pytest.mark.benchmark(group="filter 1000 nodes x 8 GPUs, 5000 pods, all nodes candidate")
def test_python_hami_style_filter_1000(benchmark, medium) -> None:
    nodes, pods, cluster = medium
    result = benchmark.pedantic(oracle.explain, args=(nodes, pods, [], new_pod(), NOW), rounds=3, iterations=1)
    expected = orjson.loads(cluster.explain(orjson.dumps(new_pod()), NOW))
    assert result["node"] == expected["node"]


@pytest.mark.benchmark(group="filter 5000 nodes x 8 GPUs, 25000 pods, 500 candidates")
def test_engine_filter_5000_nodes_500_names(benchmark, large) -> None:
    nodes, _, cluster = large
    body = orjson.dumps({"Pod": new_pod(), "NodeNames": [n["metadata"]["name"] for n in nodes[::10]]})
    response, _ = benchmark(cluster.filter, body, NOW, False)
    assert len(orjson.loads(response)["NodeNames"]) == 1


@pytest.mark.benchmark(group="filter 5000 nodes x 8 GPUs, 25000 pods, 500 candidates")
def test_engine_filter_5000_nodes_all_names(benchmark, large) -> None:
    nodes, _, cluster = large
    body = orjson.dumps({"Pod": new_pod(), "NodeNames": [n["metadata"]["name"] for n in nodes]})
    response, _ = benchmark(cluster.filter, body, NOW, False)
    assert len(orjson.loads(response)["NodeNames"]) == 1


@pytest.mark.benchmark(group="watch event: pod MODIFIED applied to the cache")
def test_engine_apply_pod_event(benchmark, medium) -> None:
    _, pods, cluster = medium
    line = orjson.dumps({"type": "MODIFIED", "object": pods[0]})
    event_type, *_ = benchmark(cluster.apply_watch_event, line)
    assert event_type == "MODIFIED"


@pytest.mark.benchmark(group="watch event: pod MODIFIED applied to the cache")
def test_python_json_decode_of_the_same_event(benchmark, medium) -> None:
    _, pods, _ = medium
    line = orjson.dumps({"type": "MODIFIED", "object": pods[0]})
    assert benchmark(orjson.loads, line)["type"] == "MODIFIED"

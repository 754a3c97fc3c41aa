"""Filter cost, side by side in one run: the Rust engine vs a HAMi-style Python implementation (the oracle).

The oracle rebuilds per-device usage from all pods on every call, as HAMi's Filter does; the engine keeps
usage incrementally. Same inputs, same answers (the differential tests prove it), different cost.
Sizes: 1k, 5k, 10k, 50k nodes x 8 GPUs, 10 resident pods per node; 500 candidate names and all nodes.
"""

from __future__ import annotations

import oracle
import orjson
import pytest
from clusters import build, engine_with
from k8s_objects import gpu_pod

NOW = 1_800_000_000
SIZES = {}


def cluster_of(nodes: int):
    if nodes not in SIZES:
        SIZES.clear()  # keep one size in memory at a time
        node_objs, pods = build(nodes)
        SIZES[nodes] = (node_objs, pods, engine_with(node_objs, pods))
    return SIZES[nodes]


def incoming() -> dict:
    return gpu_pod("incoming", namespace="bench", gpu=1, mem=12000, cores=25)


def filter_body(node_objs: list, count: int | None) -> bytes:
    names = [n["metadata"]["name"] for n in node_objs]
    if count:
        names = names[:: max(1, len(names) // count)][:count]
    return orjson.dumps({"Pod": incoming(), "Nodes": None, "NodeNames": names})


@pytest.mark.parametrize(
    ("nodes", "names"),
    [(1000, 500), (1000, None), (5000, 500), (5000, None), (10000, 500), (10000, None), (50000, 2500), (50000, None)],
)
def test_engine_filter(benchmark, nodes: int, names: int | None) -> None:
    node_objs, _, cluster = cluster_of(nodes)
    benchmark.group = f"filter {nodes} nodes, {names or nodes} names"
    body = filter_body(node_objs, names)
    decision = benchmark(cluster.decide, body, NOW, False)
    assert decision.outcome == "scheduled" and len(orjson.loads(decision.response)["NodeNames"]) == 1


@pytest.mark.parametrize(("nodes", "names"), [(1000, 500), (1000, None), (5000, 500), (5000, None)])
def test_oracle_filter(benchmark, nodes: int, names: int | None) -> None:
    node_objs, pods, cluster = cluster_of(nodes)
    benchmark.group = f"filter {nodes} nodes, {names or nodes} names"
    subset = node_objs if names is None else node_objs[:: max(1, nodes // names)][:names]
    result = benchmark.pedantic(oracle.explain, args=(subset, pods, [], incoming(), NOW), rounds=2, iterations=1)
    body = orjson.dumps({"Pod": incoming(), "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in subset]})
    assert result["node"] == cluster.decide(body, NOW, False).node


@pytest.mark.benchmark(group="watch event: pod MODIFIED applied to the cache")
def test_engine_apply_pod_event(benchmark) -> None:
    node_objs, pods, cluster = cluster_of(1000)
    line = orjson.dumps({"type": "MODIFIED", "object": pods[0]})
    event_type, *_ = benchmark(cluster.apply_watch_event, line)
    assert event_type == "MODIFIED"


@pytest.mark.benchmark(group="watch event: pod MODIFIED applied to the cache")
def test_python_json_decode_of_the_same_event(benchmark) -> None:
    _, pods, _ = cluster_of(1000)
    line = orjson.dumps({"type": "MODIFIED", "object": pods[0]})
    assert benchmark(orjson.loads, line)["type"] == "MODIFIED"

"""Live cost of the node policies, side by side in one run: FGD against fgd-balance (and HAMi's
binpack for scale) on /filter with 5,000 nodes x 8 GPUs, 10 resident pods per node, 500 candidate
names. The policy comes from the pod's ``hami.io/node-scheduler-policy`` annotation, as in
production; the target workloads are learned from the resident pods the cache was given. Each
call gets another candidate list (kube-scheduler's sampling rarely sends the same one twice).
Target: fgd-balance within 2x FGD's time per decision.
"""

from __future__ import annotations

import itertools

import orjson
import pytest
from clusters import build, engine_with
from k8s_objects import gpu_pod

NOW = 1_800_000_000
NODES, NAMES = 5000, 500
LISTS = 16
_CLUSTER: list = []


def cluster():
    if not _CLUSTER:
        node_objs, pods = build(NODES)
        _CLUSTER.append((node_objs, engine_with(node_objs, pods)))
    return _CLUSTER[0]


def body(node_objs: list, policy: str, offset: int) -> bytes:
    pod = gpu_pod("incoming", namespace="bench", gpu=1, mem=12000, cores=25)
    pod["metadata"].setdefault("annotations", {})["hami.io/node-scheduler-policy"] = policy
    names = [n["metadata"]["name"] for n in node_objs][offset :: NODES // NAMES][:NAMES]
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


@pytest.mark.parametrize("policy", ["fgd", "fgd-balance", "binpack"])
def test_live_policy_cost(benchmark, policy: str) -> None:
    node_objs, engine = cluster()
    benchmark.group = f"live node policy: {NODES} nodes x 8 GPUs, {NAMES} candidates"
    requests = itertools.cycle([body(node_objs, policy, k) for k in range(LISTS)])
    decision = benchmark(lambda: engine.decide(next(requests), NOW, False))
    assert decision.outcome == "scheduled" and len(orjson.loads(decision.response)["NodeNames"]) == 1

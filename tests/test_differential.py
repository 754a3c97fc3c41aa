"""Differential tests: the Rust engine's ``Cluster.explain`` against the Python oracle.

Thousands of random clusters (nodes with 1-8 GPUs, placed pods, quotas) and random pods to place.
The whole answer must match: chosen node, annotations, every failure reason and every node score
(floats compared exactly). Only the text of an error message may differ; both must agree on
whether there is one.
"""

import json

import hami_fast._native as native
import orjson
import pytest
from hypothesis import HealthCheck, given, note, settings
from oracle import hami
from oracle.gen import scenarios

# Hypothesis' failure report can import mypy_extensions, whose DeprecationWarning the project's
# "filterwarnings = error" would turn into an INTERNALERROR that hides the falsifying example.
pytestmark = pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning")

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def engine_explain(scenario):
    cluster = native.Cluster()
    for verb, obj in scenario["operations"]:
        getattr(cluster, verb)(orjson.dumps(obj))
    answer = cluster.explain(
        orjson.dumps(scenario["pod"]), scenario["now"], scenario["node_policy"], scenario["gpu_policy"]
    )
    return orjson.loads(answer)


def oracle_explain(scenario):
    return hami.explain(
        scenario["nodes"],
        scenario["pods"],
        scenario["quotas"],
        scenario["pod"],
        scenario["now"],
        scenario["node_policy"],
        scenario["gpu_policy"],
    )


def comparable(result):
    """The result with the error message reduced to 'is there one' (the engine's ranking extras aside)."""
    extras = ("ranked", "node_policy")
    return {**{k: v for k, v in result.items() if k not in extras}, "error": bool(result.get("error"))}


def check(scenario):
    note("scenario: " + json.dumps(scenario, sort_keys=True))
    expected = oracle_explain(scenario)
    note("oracle: " + json.dumps(expected, sort_keys=True))
    actual = engine_explain(scenario)
    note("engine: " + json.dumps(actual, sort_keys=True))
    assert comparable(actual) == comparable(expected)


@settings(max_examples=2500, **SETTINGS)
@given(scenarios())
def test_explain_matches_oracle(scenario):
    check(scenario)


@settings(max_examples=800, **SETTINGS)
@given(scenarios(with_history=True))
def test_explain_matches_oracle_after_updates_and_deletes(scenario):
    """Older versions of objects and objects deleted again must leave no trace in the engine."""
    check(scenario)


@settings(max_examples=600, **SETTINGS)
@given(scenarios(max_nodes=3, max_pods=30))
def test_explain_matches_oracle_on_busy_nodes(scenario):
    check(scenario)


@settings(max_examples=500, **SETTINGS)
@given(scenarios(max_nodes=4, annotations={"hami.io/gpu-scheduler-policy": "topology-aware"}))
def test_explain_matches_oracle_topology_aware(scenario):
    check(scenario)


@settings(max_examples=400, **SETTINGS)
@given(scenarios(max_nodes=4, annotations={"nvidia.com/numa-bind": "true"}))
def test_explain_matches_oracle_numa_bind(scenario):
    check(scenario)


@settings(max_examples=300, **SETTINGS)
@given(scenarios(max_nodes=4, annotations={"hami.io/gpu-scheduler-policy": "mutex"}))
def test_explain_matches_oracle_mutex(scenario):
    check(scenario)

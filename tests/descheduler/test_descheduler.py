"""GPU descheduler against the test Kubernetes API server (real HTTP, official client config):
target validation, safe eviction, pinning webhook, status phases, restart, REST API, leader election."""

# ruff: noqa: F811  (the world's fixtures are imported, then named as parameters)
from __future__ import annotations

import argparse
import asyncio
import json
import re
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest
from descheduler_world import (
    EVICTIONS,
    NS,
    FakeReplicaSetAndScheduler,
    admission,
    bind,
    create_placement,
    fast,
    free_port,
    make_pinner,
    node,
    patched,
    placement,
    pod,
    replacement,
    sees,
    status_of,
)
from hami_fast.descheduler import kube as k
from hami_fast.descheduler.controller import Controller, Timeouts
from hami_fast.kube.client import KubeClient, load_api_client
from k8s_objects import nvidia_register

# -- validation before any eviction ------------------------------------------------------------


@pytest.mark.parametrize(
    "target, gpus, message",
    [
        ("nowhere", ["gpu-0"], "node nowhere not found"),
        ("n2", ["gpu-5"], "GPU gpu-5 not found"),
        ("n2", ["gpu-1"], "not healthy"),
        ("n2", ["gpu-0"], "does not fit"),
    ],
)
def test_invalid_target_fails_and_evicts_nothing(cluster, client, target, gpus, message):
    create_placement(cluster, placement("p", target, gpus, evict="old"))
    c = Controller(client, fast())
    c.reconcile_all()
    c.reconcile_all()
    status = status_of(cluster, "p")
    assert status["phase"] == "Failed" and message in status["message"], status
    assert cluster.count("create", EVICTIONS) == 0
    assert cluster.get("pods", "old", NS) is not None


def test_unregistered_node_is_an_invalid_target(cluster, client):
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "plain"}})
    create_placement(cluster, placement("p", "plain", ["gpu-0"], evict="old"))
    Controller(client, fast()).reconcile_all()
    status = status_of(cluster, "p")
    assert status["phase"] == "Failed" and "not registered" in status["message"]
    assert cluster.count("create", EVICTIONS) == 0


def daemonset_pod(name: str) -> dict:
    body = pod(name, "n1", 0, 4000)
    body["metadata"]["ownerReferences"][0]["kind"] = "DaemonSet"
    return body


def other_scheduler_pod(name: str) -> dict:
    body = pod(name, "n1", 0, 4000)
    body["spec"]["schedulerName"] = "default-scheduler"
    return body


@pytest.mark.parametrize(
    "evictee, why",
    [
        (
            pod("lonely", "n1", 0, 4000, owned=False),
            "is a bare pod (no controller owner): it would not be recreated, so it is not evicted",
        ),
        (daemonset_pod("lonely"), "is a DaemonSet pod and is not evicted"),
        (
            other_scheduler_pod("lonely"),
            "does not use schedulerName hami-scheduler: its replacement would not be pinned",
        ),
    ],
    ids=["bare", "daemonset", "other-scheduler"],
)
def test_a_pod_nothing_would_recreate_here_is_never_evicted(kubeapi, client, evictee, why):
    kubeapi.create(node("n1"))
    kubeapi.create(evictee)
    create_placement(kubeapi, placement("p", "n1", ["gpu-1"], evict="lonely"))
    c = Controller(client, fast())
    for _ in range(3):
        c.reconcile_all()
    status = status_of(kubeapi, "p")
    assert status["phase"] == "Failed" and f"spec.evictPod: pod {NS}/lonely {why}" in status["message"], status
    assert kubeapi.count("create", EVICTIONS) == 0
    assert kubeapi.get("pods", "lonely", NS) is not None


def test_evictee_is_checked_at_validation(cluster, client):
    create_placement(cluster, placement("typo", "n1", ["gpu-1"], evict="no-such-pod"))
    create_placement(cluster, placement("other", "n1", ["gpu-1"], evict="busy"))
    Controller(client, fast()).reconcile_all()
    assert "not found" in status_of(cluster, "typo")["message"]
    assert "does not match spec.podSelector" in status_of(cluster, "other")["message"]
    assert cluster.count("create", EVICTIONS) == 0


def test_empty_selector_and_duplicate_req_id_fail(cluster, client):
    body = placement("p1", "n1", ["gpu-1"])
    body["spec"]["podSelector"] = {"matchLabels": {}}
    create_placement(cluster, body)
    create_placement(cluster, placement("p2", "n1", ["gpu-1"], req_id="same"))
    c = Controller(client, fast())
    c.reconcile_all()
    create_placement(cluster, placement("p3", "n1", ["gpu-1"], req_id="same"))
    c.reconcile_all()
    assert "matchLabels is empty" in status_of(cluster, "p1")["message"]
    assert status_of(cluster, "p2")["phase"] == "Pending"
    assert "already executed" in status_of(cluster, "p3")["message"]


# -- eviction, pinning, completion ---------------------------------------------------------------


def test_full_move_with_restart_mid_eviction(cluster, client):
    create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
    c = Controller(client, fast())
    c.reconcile_all()
    assert status_of(cluster, "move")["phase"] == "Pending"
    assert status_of(cluster, "move")["resolvedUUIDs"] == ["GPU-n1-1"]
    c.reconcile_all()
    st = status_of(cluster, "move")
    assert st["phase"] == "DeletingOldPod" and st["evictedUID"] == "u-old"
    assert cluster.get("pods", "old", NS) is None
    [ev] = cluster.requests("create", EVICTIONS)
    assert ev.json["kind"] == "Eviction"

    # A new controller (restart) resumes from the status: no second eviction.
    c2 = Controller(client, fast())
    c2.reconcile_all()
    assert cluster.count("create", EVICTIONS) == 1

    # The ReplicaSet's replacement goes through the pinning webhook.
    new = patched(replacement(), make_pinner(client).admit(admission(replacement())))
    assert new is not None
    ann = new["metadata"]["annotations"]
    assert ann["nvidia.com/use-gpuuuid"] == "GPU-n1-1" and ann[k.STAMP_NAME] == f"{NS}/move"
    terms = new["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    new["metadata"]["name"] = "infer-abcde"
    cluster.create(new)
    c2.reconcile_all()
    st = status_of(cluster, "move")
    assert st["phase"] == "DeletingOldPod" and st["assignmentDetails"] == [
        {"podName": "infer-abcde", "gpuDevice": "GPU-n1-1"}
    ]
    bind(cluster, "infer-abcde", "n1", "GPU-n1-1")
    c2.reconcile_all()
    st = status_of(cluster, "move")
    assert st["phase"] == "Completed" and st["consumedAt"], st
    reasons = [e["reason"] for e in cluster.events(NS) if e["object"].startswith("HamiPodPlacement/")]
    assert reasons == ["TargetValidated", "Evicted", "Completed"], cluster.events(NS)
    # Later pods with the same labels are not pinned: the placement was consumed once.
    assert patched(replacement(), make_pinner(client).admit(admission(replacement(), uid="r2"))) is None


def dcu_node(name: str) -> dict:
    register = "".join(f"DCU-{name}-{i},4,65536,100,DCU-Z100L,0,true,{i},hami-core:" for i in range(2))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": {"hami.io/node-dcu-register": register}},
    }


def dcu_pod(name: str | None, node_name: str | None = None) -> dict:
    """A Hygon DCU pod of the `dcu` ReplicaSet (bound on card 0 of `node_name` when given)."""
    p = pod(name or "", None, app="dcu")
    limits = {"hygon.com/dcunum": "1", "hygon.com/dcumem": "4000", "hygon.com/dcucores": "30"}
    p["spec"]["containers"][0]["resources"] = {"limits": limits}
    if node_name:
        p["metadata"]["annotations"] = {
            "hami.io/vgpu-node": node_name,
            "hami.io/dcu-devices-allocated": f"DCU-{node_name}-0,DCU,4000,30:;",
        }
        p["spec"]["nodeName"] = node_name
        p["status"] = {"phase": "Running"}
    else:
        p["metadata"].pop("name")
        p["metadata"].pop("uid")
        p["metadata"]["generateName"] = "dcu-"
    return p


def test_another_backends_pod_moves_pinned_by_its_own_uuid_key(cluster, client):
    cluster.create(dcu_node("d1"))
    cluster.create(dcu_pod("dcu-old", "d1"))
    create_placement(cluster, placement("move", "d1", ["DCU-d1-1"], evict="dcu-old", app="dcu"))
    c = Controller(client, fast())
    c.reconcile_all()
    st = status_of(cluster, "move")
    assert st["phase"] == "Pending" and st["pinAnnotations"] == {"hygon.com/use-gpuuuid": "DCU-d1-1"}, st
    c.reconcile_all()
    assert cluster.get("pods", "dcu-old", NS) is None
    new = patched(dcu_pod(None), make_pinner(client).admit(admission(dcu_pod(None))))
    assert new is not None
    ann = new["metadata"]["annotations"]
    assert ann["hygon.com/use-gpuuuid"] == "DCU-d1-1" and k.USE_UUID not in ann
    new["metadata"]["name"] = "dcu-abcde"
    cluster.create(new)
    c.reconcile_all()
    cluster.patch(
        "pods",
        "dcu-abcde",
        {
            "spec": {"nodeName": "d1"},
            "status": {"phase": "Running"},
            "metadata": {
                "annotations": {"hami.io/vgpu-node": "d1", "hami.io/dcu-devices-allocated": "DCU-d1-1,DCU,4000,30:;"}
            },
        },
        NS,
    )
    c.reconcile_all()
    st = status_of(cluster, "move")
    assert st["phase"] == "Completed" and st["assignmentDetails"] == [{"podName": "dcu-abcde", "gpuDevice": "DCU-d1-1"}]


def test_replacement_on_the_wrong_gpu_fails(cluster, client):
    create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
    c = Controller(client, fast())
    c.reconcile_all()
    c.reconcile_all()
    new = patched(replacement(), make_pinner(client).admit(admission(replacement())))
    new["metadata"]["name"] = "infer-x"
    cluster.create(new)
    bind(cluster, "infer-x", "n1", "GPU-n1-0")
    c.reconcile_all()
    st = status_of(cluster, "move")
    assert st["phase"] == "Failed" and "not on the target" in st["message"]


def test_disruption_budget_is_waited_on_not_bypassed(cluster, client):
    cluster.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "infer-pdb", "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "infer"}}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1},
        }
    )
    create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
    c = Controller(client, fast())
    c.reconcile_all()
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        c.reconcile_all()
        time.sleep(0.05)
    st = status_of(cluster, "move")
    assert st["phase"] == "Pending" and "429" in st["message"] and st["evictionAttempts"] >= 2, st
    assert cluster.get("pods", "old", NS) is not None, "never forced"
    assert cluster.count("DELETE", "/api/v1/namespaces/*/pods/*") == 0
    attempts = [r.time for r in cluster.requests("create", EVICTIONS)]
    assert all(b - a >= 0.04 for a, b in zip(attempts, attempts[1:])), "retries back off"
    cluster.patch("poddisruptionbudgets", "infer-pdb", {"status": {"disruptionsAllowed": 1}}, NS)
    time.sleep(0.15)
    c.reconcile_all()
    assert status_of(cluster, "move")["phase"] == "DeletingOldPod"
    assert cluster.get("pods", "old", NS) is None


def test_budget_that_never_opens_times_out_without_eviction(cluster, client):
    cluster.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb", "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "infer"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
    c = Controller(client, Timeouts(eviction=0.3, backoff_min=0.05, backoff_max=0.05))
    deadline = time.monotonic() + 2.0
    while status_of(cluster, "move").get("phase") != "Failed" and time.monotonic() < deadline:
        c.reconcile_all()
        time.sleep(0.05)
    st = status_of(cluster, "move")
    assert st["phase"] == "Failed" and "disruption" in st["message"].lower()
    assert cluster.get("pods", "old", NS) is not None


def test_placement_consumed_once_under_concurrent_pod_creation(cluster, client):
    create_placement(cluster, placement("pin", "n1", ["gpu-1"]))
    Controller(client, fast()).reconcile_all()
    assert status_of(cluster, "pin")["phase"] == "Pending"
    # Two webhook replicas, 12 pods admitted at once.
    replicas = [make_pinner(KubeClient(load_api_client(cluster.kubeconfig), qps=0)) for _ in range(2)]
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda i: replicas[i % 2].admit(admission(replacement(), uid=f"r{i}")), range(12)))
    pinned = [a for a in answers if "patch" in orjson.loads(a)["response"]]
    assert len(pinned) == 1
    assert status_of(cluster, "pin")["claimedBy"]


def test_webhook_ignores_other_schedulers_dry_runs_and_unvalidated(cluster, client):
    create_placement(cluster, placement("pin", "n1", ["gpu-1"]))
    pinner = make_pinner(client)
    assert patched(replacement(), pinner.admit(admission(replacement()))) is None, "not validated yet"
    Controller(client, fast()).reconcile_all()
    sees(pinner, "pin", "Pending")
    other = replacement()
    other["spec"]["schedulerName"] = "default-scheduler"
    assert patched(other, pinner.admit(admission(other))) is None
    assert patched(replacement(), pinner.admit(admission(replacement(), dry_run=True))) is None
    assert not status_of(cluster, "pin").get("claimedBy")
    # Existing affinity terms keep their expressions and gain the node requirement.
    withaff = replacement()
    withaff["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
            }
        }
    }
    out = patched(withaff, pinner.admit(admission(withaff)))
    [term] = out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] and term["matchFields"] == [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}
    ]


def test_passive_placement_completes_when_the_pinned_pod_binds(cluster, client):
    create_placement(cluster, placement("pin", "n1", ["gpu-1"]))
    c = Controller(client, fast())
    c.reconcile_all()
    new = patched(replacement(), make_pinner(client).admit(admission(replacement())))
    new["metadata"]["name"] = "infer-new"
    cluster.create(new)
    c.reconcile_all()
    bind(cluster, "infer-new", "n1", "GPU-n1-1")
    c.reconcile_all()
    assert status_of(cluster, "pin")["phase"] == "Completed"
    assert cluster.count("create", EVICTIONS) == 0


def test_dry_run_validates_but_never_evicts(cluster, client):
    create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
    c = Controller(client, fast(), dry_run=True)
    for _ in range(3):
        c.reconcile_all()
    assert status_of(cluster, "move")["phase"] == "Pending"
    assert cluster.count("create", EVICTIONS) == 0


# -- REST API on a real HTTP listener; leader election --------------------------------------------


@pytest.fixture
def served(cluster):
    from hami_fast.descheduler.cli import Runtime, add_arguments
    from hami_fast.descheduler.config import load

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    port = free_port()
    args = parser.parse_args(
        [
            "--bind",
            f"127.0.0.1:{port}",
            "--kubeconfig",
            cluster.kubeconfig,
            "--period",
            "0.1",
            "--leader-elect",
            "--lease-namespace",
            "kube-system",
        ]
    )
    runtime = Runtime(load(args, environ={}))
    runtime.start()
    ready = threading.Event()
    thread = threading.Thread(target=lambda: asyncio.run(runtime.serve(ready)), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield f"http://127.0.0.1:{port}", runtime
    runtime.stop.set()
    thread.join(10)


def http(url: str, body: bytes | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_rest_api(served, cluster):
    base, runtime = served
    status, info = http(f"{base}/api/v1/cluster-info")
    assert status == 200
    n1 = next(n for n in info["nodes"] if n["name"] == "n1")
    assert n1["devices"][0]["used"]["memoryMiB"] == 4000 and n1["devices"][0]["uuid"] == "GPU-n1-0"
    assert info["summary"]["gpus"] == 4 and info["summary"]["healthyGpus"] == 3
    status, frag = http(f"{base}/api/v1/fragmentation")
    assert status == 200 and {n["node"] for n in frag["nodes"]} == {"n1", "n2"} and "fragmentation" in frag["cluster"]
    status, plan = http(f"{base}/api/v1/plan", b'{"max_moves": 3}')
    assert status == 200 and {"moves", "before", "after"} <= set(plan)
    assert http(f"{base}/api/v1/plan", b"{nope")[0] == 400
    status, check = http(
        f"{base}/api/v1/placements/validate",
        orjson.dumps({"pod": f"{NS}/old", "nodeName": "n2", "gpuDevices": ["gpu-0"]}),
    )
    assert status == 200 and check["ok"] is False and "does not fit" in check["message"]
    status, check = http(
        f"{base}/api/v1/placements/validate",
        orjson.dumps({"pod": f"{NS}/old", "nodeName": "n1", "gpuDevices": ["gpu-1"]}),
    )
    assert check == {
        "ok": True,
        "uuids": ["GPU-n1-1"],
        "message": "",
        "field": "",
        "pin": {"nvidia.com/use-gpuuuid": "GPU-n1-1"},
    }
    assert http(f"{base}/api/v1/placements/validate", b'{"pod": "x"}')[0] == 400
    assert cluster.count("create", EVICTIONS) == 0, "plan is a dry run"
    create_placement(cluster, placement("move", "n1", ["gpu-1"]))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and status_of(cluster, "move").get("phase") != "Pending":
        time.sleep(0.1)
    status, listed = http(f"{base}/api/v1/placements")
    assert (
        status == 200
        and listed["items"][0]["phase"] == "Pending"
        and listed["items"][0]["resolvedUUIDs"] == ["GPU-n1-1"]
    )
    assert info["health"]["leader"] in (True, False)
    assert http(f"{base}/nope")[0] == 404


def test_leader_election_one_leader(kubeapi, client):
    from hami_fast.kube.lease import LeaseElector

    stop = threading.Event()
    a = LeaseElector(client, "kube-system", "desched", stop, identity="a", duration=2, period=0.1)
    b = LeaseElector(client, "kube-system", "desched", stop, identity="b", duration=2, period=0.1)
    assert a.try_acquire() is True
    assert b.try_acquire() is False
    assert a.try_acquire() is True, "renew"
    lease = kubeapi.get("leases", "desched", "kube-system")
    assert lease["spec"]["holderIdentity"] == "a"
    time.sleep(2.2)
    assert b.try_acquire() is True, "an expired lease is taken over"
    assert a.try_acquire() is False
    stop.set()


def test_each_stretch_of_leading_is_a_new_term(kubeapi, client):
    """The webhook's cache trust is per term: a lease lost and won back must be told apart."""
    from hami_fast.kube.lease import LeaseElector

    stop = threading.Event()
    a = LeaseElector(client, "kube-system", "terms", stop, identity="a", duration=1, period=0.1)
    b = LeaseElector(client, "kube-system", "terms", stop, identity="b", duration=1, period=0.1)
    assert a.step() and a.step() and a.terms == 1, "renewing stays in the term"
    time.sleep(1.1)
    assert b.step() and not a.step() and b.terms == 1
    time.sleep(1.1)
    assert a.step() and a.terms == 2, "won back: a new term"
    stop.set()


# -- plan --apply: one placement per move, waited on, through the controller ----------------------


def test_plan_apply_runs_moves_one_by_one(kubeapi, client):
    from hami_fast import _native
    from hami_fast.descheduler.apply import apply_moves
    from hami_fast.descheduler.controller import ControllerLoop

    kubeapi.create(node("n1"))
    kubeapi.create(node("n2"))
    for name, n, g, mem in (("a", "n1", 0, 4000), ("b", "n1", 1, 3000), ("c", "n2", 0, 5000), ("d", "n2", 1, 2000)):
        kubeapi.create(pod(name, n, g, mem, app=f"app-{name}"))
    plan = orjson.loads(_native.plan(k.snapshot_inputs(client), b'{"max_moves": 4}'))
    # All four fit on one 16 GB card (14 GB, 80 % cores): three moves free three GPUs.
    assert len(plan["moves"]) == 3 and plan["after"]["free_whole_gpus"] == 3
    stop = threading.Event()
    leading = threading.Event()
    leading.set()
    ControllerLoop(Controller(client, fast()), leading, stop, period=0.05).start()
    FakeReplicaSetAndScheduler(
        kubeapi, client, stop, {"app-a": 4000, "app-b": 3000, "app-c": 5000, "app-d": 2000}
    ).start()
    try:
        results = apply_moves(client, plan["moves"], interval=0.1, timeout=20, say=lambda m: None)
    finally:
        stop.set()
    assert [r["phase"] for r in results] == ["Completed"] * len(plan["moves"]), results
    final = orjson.loads(_native.fragmentation(k.snapshot_inputs(client)))
    assert final["cluster"]["free_whole_gpus"] == 3
    assert kubeapi.count("create", EVICTIONS) == len(plan["moves"])


def test_plan_apply_waits_out_an_api_server_that_stops_answering_mid_move(kubeapi, client):
    """The placement's status reads fail (503s, then no answer at all) while the controller moves
    the pod: the run keeps waiting and reports the move Completed, once, not a failed move."""
    from hami_fast.descheduler.apply import apply_moves
    from hami_fast.descheduler.controller import ControllerLoop

    kubeapi.create(node("n1"))
    kubeapi.create(pod("a", "n1", 0, 4000, app="app-a"))
    kubeapi.create(pod("b", "n1", 1, 3000, app="app-b"))
    plan = orjson.loads(_native_plan(client))
    [move] = plan["moves"]
    stop, leading = threading.Event(), threading.Event()
    leading.set()
    kubeapi.fail("GET", re.compile(r".*/hamipodplacements/[^/]+$"), 503, times=4)
    kubeapi.fail("GET", re.compile(r".*/hamipodplacements/[^/]+$"), 429, times=2)
    kubeapi.fail("GET", re.compile(r".*/hamipodplacements/[^/]+$"), 403, times=2)  # RBAC warming up
    said: list[str] = []
    ControllerLoop(Controller(client, fast()), leading, stop, period=0.05).start()
    FakeReplicaSetAndScheduler(kubeapi, client, stop, {"app-a": 4000, "app-b": 3000}).start()
    try:
        results = apply_moves(client, [move], interval=0.1, timeout=30, say=said.append)
    finally:
        stop.set()
    assert [r["phase"] for r in results] == ["Completed"], (results, said)
    assert any("did not answer" in line for line in said), said
    assert kubeapi.count("create", EVICTIONS) == 1


def _native_plan(client) -> bytes:
    from hami_fast import _native

    return _native.plan(k.snapshot_inputs(client), b'{"max_moves": 1}')


def test_status_fields_are_declared_in_the_crd(cluster, client):
    """A structural schema prunes undeclared status fields: everything the controller and the
    webhook write must be in deploy/crds."""
    from pathlib import Path

    import yaml

    crd = yaml.safe_load(
        (
            Path(__file__).resolve().parents[2]
            / "deploy"
            / "crds"
            / "hamipodplacements.scheduling.hami.placement.com.yaml"
        ).read_text()
    )
    version = crd["spec"]["versions"][0]
    assert crd["metadata"]["name"] == "hamipodplacements.scheduling.hami.placement.com" and version["name"] == "v1"
    declared = set(version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"])
    cluster.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb", "namespace": NS},
            "spec": {"selector": {"matchLabels": {"app": "infer"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
    c = Controller(client, fast())
    c.reconcile_all()
    c.reconcile_all()
    written = set(status_of(cluster, "move"))
    cluster.patch("poddisruptionbudgets", "pdb", {"status": {"disruptionsAllowed": 1}}, NS)
    time.sleep(0.15)
    c.reconcile_all()
    make_pinner(client).admit(admission(replacement()))
    written |= set(status_of(cluster, "move"))
    assert {"resolvedUUIDs", "claimedBy", "evictedAt", "evictionAttempts"} <= written
    assert written <= declared, written - declared


def test_cli_accepts_the_helm_chart_flags():
    from hami_fast.descheduler.cli import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        [
            "--http_bind=0.0.0.0:8083",
            "--webhook-bind=0.0.0.0:9443",
            "--cert_file=/tls/tls.crt",
            "--key_file=/tls/tls.key",
            "--scheduler-name=hami-scheduler",
            "--leader-elect=true",
            "--leader-elect-resource-name=l",
            "--leader-elect-resource-namespace=ns",
            "--eviction-mode=Eviction",
            "--eviction-timeout=5m",
            "--replacement-timeout=1h30m",
            "--dry-run=false",
            "--placement-ttl=1h",
        ]
    )
    assert (args.bind, args.webhook_bind, args.cert_file, args.leader_elect, args.lease_name, args.lease_namespace) == (
        "0.0.0.0:8083",
        "0.0.0.0:9443",
        "/tls/tls.crt",
        True,
        "l",
        "ns",
    )
    assert (args.eviction_timeout, args.replacement_timeout, args.dry_run) == (300.0, 5400.0, False)
    assert args.placement_ttl == 3600.0 and parser.parse_args(["--placement-ttl=0s"]).placement_ttl == 0
    with pytest.raises(SystemExit):
        parser.parse_args(["--eviction-mode=Delete"])


@pytest.mark.parametrize(
    "went_bad, why",
    [
        ({"unhealthy": (1,)}, "spec.gpuDevices: GPU GPU-n1-1 on node n1 is not healthy"),
        ({"gpus": 1}, "spec.gpuDevices: GPU GPU-n1-1 not found on node n1"),
        (None, "spec.nodeName: node n1 not found"),
    ],
)
def test_webhook_does_not_pin_to_a_target_that_went_bad(cluster, client, went_bad, why):
    """The engine's target check at admission names the placement field that went bad."""
    create_placement(cluster, placement("pin", "n1", ["gpu-1"]))
    Controller(client, fast()).reconcile_all()
    if went_bad is None:
        cluster.delete("nodes", "n1")
    else:
        registered = nvidia_register("n1", **went_bad)
        cluster.patch("nodes", "n1", {"metadata": {"annotations": {"hami.io/node-nvidia-register": registered}}})
    assert patched(replacement(), make_pinner(client).admit(admission(replacement()))) is None
    st = status_of(cluster, "pin")
    assert st["phase"] == "Failed"
    assert st["message"] == f"target no longer valid at admission: {why}; nothing was pinned"


def test_webhook_on_its_own_tls_listener(cluster, tmp_path):
    """As the Helm chart runs it: API on plain HTTP, /webhook on a separate HTTPS listener."""
    import ssl

    import trustme
    from hami_fast.descheduler.cli import Runtime, add_arguments
    from hami_fast.descheduler.config import load

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    api_port, hook_port = free_port(), free_port()
    args = parser.parse_args(
        [
            f"--http_bind=127.0.0.1:{api_port}",
            f"--webhook-bind=127.0.0.1:{hook_port}",
            f"--cert_file={tmp_path / 'tls.crt'}",
            f"--key_file={tmp_path / 'tls.key'}",
            "--kubeconfig",
            cluster.kubeconfig,
            "--period",
            "0.1",
            "--leader-elect=false",
        ]
    )
    runtime = Runtime(load(args, environ={}))
    runtime.start()
    ready = threading.Event()
    thread = threading.Thread(target=lambda: asyncio.run(runtime.serve(ready)), daemon=True)
    thread.start()
    try:
        assert ready.wait(10)
        create_placement(cluster, placement("pin", "n1", ["gpu-1"]))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and status_of(cluster, "pin").get("phase") != "Pending":
            time.sleep(0.1)
        context = ssl.create_default_context()
        ca.configure_trust(context)
        req = urllib.request.Request(
            f"https://127.0.0.1:{hook_port}/webhook", data=admission(replacement()), method="POST"
        )
        with urllib.request.urlopen(req, timeout=10, context=context) as r:
            out = patched(replacement(), r.read())
        assert out["metadata"]["annotations"]["nvidia.com/use-gpuuuid"] == "GPU-n1-1"
        assert http(f"http://127.0.0.1:{api_port}/api/v1/placements")[1]["items"][0]["claimedBy"]
    finally:
        runtime.stop.set()
        thread.join(10)


def test_moves_are_paced_one_per_workload(cluster, client):
    cluster.create(pod("old2", "n1", 1, 2000))
    create_placement(cluster, placement("m1", "n1", ["gpu-1"], evict="old"))
    create_placement(cluster, placement("m2", "n1", ["gpu-0"], evict="old2"))
    c = Controller(client, fast())
    c.reconcile_all()  # validate both
    c.reconcile_all()  # evict one; the other waits (same selector app=infer)
    phases = {n: status_of(cluster, n)["phase"] for n in ("m1", "m2")}
    assert sorted(phases.values()) == ["DeletingOldPod", "Pending"], phases
    waiting = "m1" if phases["m1"] == "Pending" else "m2"
    assert "same workload" in status_of(cluster, waiting)["message"]
    assert cluster.count("create", EVICTIONS) == 1


def test_a_follower_does_not_reconcile(cluster, client):
    from hami_fast.descheduler.controller import ControllerLoop

    create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
    stop, leading = threading.Event(), threading.Event()
    ControllerLoop(Controller(client, fast()), leading, stop, period=0.05).start()
    time.sleep(0.4)
    assert status_of(cluster, "move") == {}
    leading.set()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and status_of(cluster, "move").get("phase") != "DeletingOldPod":
        time.sleep(0.05)
    stop.set()
    assert status_of(cluster, "move")["phase"] == "DeletingOldPod"


def test_offline_api_on_a_snapshot(tmp_path):
    from hami_fast.descheduler.cli import Runtime, add_arguments
    from hami_fast.descheduler.config import load

    snap = tmp_path / "cluster.json"
    snap.write_bytes(
        orjson.dumps(
            {"kind": "List", "items": [node("n1"), node("n2"), pod("a", "n1", 0, 4000), pod("b", "n2", 1, 3000)]}
        )
    )
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    port = free_port()
    runtime = Runtime(load(parser.parse_args(["--bind", f"127.0.0.1:{port}", "--snapshot", str(snap)]), environ={}))
    runtime.start()
    ready = threading.Event()
    thread = threading.Thread(target=lambda: asyncio.run(runtime.serve(ready)), daemon=True)
    thread.start()
    try:
        assert ready.wait(10)
        base = f"http://127.0.0.1:{port}"
        status, info = http(f"{base}/api/v1/cluster-info")
        assert status == 200 and info["summary"]["gpus"] == 4 and info["health"]["kubeAPI"] == "snapshot"
        assert http(f"{base}/api/v1/placements") == (200, {"items": [], "allocations": []})
        status, plan = http(f"{base}/api/v1/plan", b'{"max_moves": 2}')
        assert status == 200 and len(plan["moves"]) == 1 and plan["after"]["free_whole_gpus"] == 3
        review = orjson.loads(
            urllib.request.urlopen(
                urllib.request.Request(f"{base}/webhook", data=admission(replacement()), method="POST"), timeout=10
            ).read()
        )
        assert review["response"]["allowed"] is True and "patch" not in review["response"]
    finally:
        runtime.stop.set()
        thread.join(10)


def test_claim_survives_a_conflict_with_the_controllers_own_status_write(cluster, client):
    create_placement(cluster, placement("move", "n1", ["gpu-1"], evict="old"))
    c = Controller(client, fast())
    c.reconcile_all()
    c.reconcile_all()
    # The first claim write loses a race (409) against an unrelated status update; the placement stays open.
    cluster.fail(
        "PUT", "/apis/scheduling.hami.placement.com/v1/namespaces/*/hamipodplacements/move/status", 409, times=1
    )
    new = patched(replacement(), make_pinner(client).admit(admission(replacement())))
    assert new is not None and new["metadata"]["annotations"]["nvidia.com/use-gpuuuid"] == "GPU-n1-1"
    writes = cluster.requests(
        "PUT", "/apis/scheduling.hami.placement.com/v1/namespaces/*/hamipodplacements/move/status"
    )
    assert [w.status for w in writes][-2:] == [409, 200]
    assert status_of(cluster, "move")["claimedBy"] is not None
    assert patched(replacement(), make_pinner(client).admit(admission(replacement(), uid="r2"))) is None


def test_a_planned_move_selects_on_no_label_the_replacement_gets_only_when_scheduled():
    """The Filter patch labels a bound pod `hami.io/vgpu-node`; the replacement has no such label at
    admission, so a selector carrying it would never pin it (found on the real control plane)."""
    from hami_fast.descheduler.apply import placement_for

    bound = pod("old", "n1")
    bound["metadata"]["labels"].update({"hami.io/vgpu-node": "n1", "pod-template-hash": "7d9c"})
    move = {
        "pod": f"{NS}/old",
        "from": {"node": "n1", "gpus": ["GPU-n1-0"]},
        "to": {"node": "n1", "gpus": ["GPU-n1-1"]},
    }
    selector = placement_for(move, bound, "req-1")["spec"]["podSelector"]
    assert selector == {"matchLabels": {"app": "infer", "pod-template-hash": "7d9c"}}

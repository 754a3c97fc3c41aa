"""End-to-end: the descheduler on the real control plane. `hami-fast plan --for POD --live --apply`
frees a GPU for a pending pod by moving a Deployment's pod through a HamiPodPlacement (the Eviction
API, the replacement pinned by the webhook to the move's target GPU), and the pending pod lands on
the freed GPU. The GPU map on the descheduler's port shows the same plan first. Opt-in, see conftest.py.

The pods ask for `nvidia.com/use-gputype: A100`: only this module's nodes have A100s, so the other
modules' nodes and pods play no part (the planner honours the type as the scheduler does).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane import ApiError, require_descheduler, wait_for
from k8s_objects import GPU_IDS_HAMI_REGISTERS, GPU_IDS_THAT_BREAK_ANNOTATIONS
from sidebyside import metric_usage, scrape
from test_e2e_control_plane import (
    NS,
    _alive,
    allocations,
    device_plugin_allocate,
    events_for,
    get_pod,
    gpu_pod,
    logs,
    make_node,
    pods_path,
    wait_bound,
)

SUITE = {"suite": "descheduler"}
A100 = {"nvidia.com/use-gputype": "A100"}
GPU_MEM = 16384
NODE = "a100-node"  # its GPUs register as GPU-a100-node-<i>, as test clusters name them
PLACEMENTS = f"/apis/scheduling.hami.placement.com/v1/namespaces/{NS}/hamipodplacements"


def a100_node(cluster, name: str, gpus: int) -> None:
    make_node(cluster.api, name, gpus=gpus, memory=GPU_MEM, gpu_type="NVIDIA-A100-SXM4-16GB")

    def registered():
        _alive(cluster)
        with urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        return all(f"GPU-{name}-{g}" in text for g in range(gpus))

    wait_for(f"hami-fast to register {name}'s GPUs", registered, timeout=60)


def suite_pods(api) -> list[dict[str, Any]]:
    return [
        p
        for p in api.get(pods_path() + "?labelSelector=suite%3Ddescheduler")["items"]
        if not p["metadata"].get("deletionTimestamp")
    ]


class DevicePlugin(threading.Thread):
    """What HAMi's device plugin does for each of this module's pods once it is bound (there is no
    kubelet): mark it allocated and release the node lock, so the next bind on the node can go on."""

    def __init__(self, api) -> None:
        super().__init__(daemon=True)
        self.api, self.stop = api, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.25):
            try:
                for p in suite_pods(self.api):
                    phase = (p["metadata"].get("annotations") or {}).get("hami.io/bind-phase")
                    if p["spec"].get("nodeName") and phase == "allocating":
                        device_plugin_allocate(self.api, p)
            except (ApiError, OSError):
                continue


@pytest.fixture(scope="module")
def descheduler(cluster) -> Iterator[int]:
    require_descheduler()
    api = cluster.api
    api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, exist_ok=True)
    port = cluster.ensure_descheduler()
    a100_node(cluster, NODE, gpus=2)
    plugin = DevicePlugin(api)
    plugin.start()
    try:
        yield port
    finally:
        plugin.stop.set()
        plugin.join(5)
        remove_workloads(api)
        api.delete(f"/api/v1/nodes/{NODE}")


def remove_workloads(api) -> None:
    """This module's Deployments, ReplicaSets and pods. No garbage collector runs here, so the
    ReplicaSets go explicitly (else they recreate the pods)."""
    selector = "?labelSelector=suite%3Ddescheduler"
    for d in api.get(f"/apis/apps/v1/namespaces/{NS}/deployments")["items"]:
        if (d["spec"]["template"]["metadata"].get("labels") or {}).get("suite") == SUITE["suite"]:
            api.delete(f"/apis/apps/v1/namespaces/{NS}/deployments/{d['metadata']['name']}")
    api.delete(f"/apis/apps/v1/namespaces/{NS}/replicasets{selector}")
    api.delete(pods_path() + selector)
    wait_for("this module's pods gone", lambda: not api.get(pods_path() + selector)["items"], timeout=30)
    api.delete(PLACEMENTS)


def deployment(api, name: str, replicas: int, mem: int, labels: dict[str, str] | None = None) -> None:
    template = gpu_pod("unused", scheduler="hami-scheduler", gpu=1, mem=mem)
    labels = {"app": name, **SUITE, **(labels or {})}
    api.create(
        f"/apis/apps/v1/namespaces/{NS}/deployments",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": labels, "annotations": A100}, "spec": template["spec"]},
            },
        },
    )


def pods_of(api, app: str) -> list[dict[str, Any]]:
    return [p for p in suite_pods(api) if p["metadata"]["labels"].get("app") == app]


def allocated(api, app: str, count: int) -> list[dict[str, Any]]:
    """The app's `count` pods once each is bound and allocated."""

    def ready():
        pods = pods_of(api, app)
        ok = [p for p in pods if (p["metadata"].get("annotations") or {}).get("hami.io/bind-phase") == "success"]
        return ok if len(ok) == count == len(pods) else None

    return wait_for(f"{count} pods of {app} allocated", ready, timeout=90, interval=0.3)


def live_map(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/map", timeout=10) as resp:
        return json.loads(resp.read())


def diagnose(api) -> str:
    placements = [(p["metadata"]["name"], p.get("spec"), p.get("status")) for p in api.get(PLACEMENTS)["items"]]
    pods = [
        (p["metadata"]["name"], p["spec"].get("nodeName"), p["metadata"].get("annotations"))
        for p in api.get(pods_path() + "?labelSelector=suite%3Ddescheduler")["items"]
    ]
    return f"placements: {json.dumps(placements, indent=1)}\npods: {json.dumps(pods, indent=1)}"


def one_filler_per_gpu(cluster, app: str) -> dict[str, str]:
    """Two Deployment pods of 4000 MiB: GPU spread (the chart's default) puts one on each A100.

    First, hami-fast's own view must show the A100s empty: the API server forgets the previous
    test's pods before hami-fast's watch tells it (seconds behind on a loaded machine), and a pod
    still counted on one A100 makes spread put both fillers on the other, as HAMi would."""
    api = cluster.api
    ours = {f"GPU-{NODE}-0", f"GPU-{NODE}-1"}
    wait_for(
        "hami-fast to see the A100s empty",
        lambda: not any(u[0] for uuid, u in metric_usage(scrape(cluster.metrics_port)).items() if uuid in ours),
        timeout=60,
        interval=0.5,
    )
    deployment(api, app, replicas=2, mem=4000)
    on = {allocations(p)[0][0]: p["metadata"]["name"] for p in allocated(api, app, 2)}
    assert set(on) == {f"GPU-{NODE}-0", f"GPU-{NODE}-1"}, f"{app} not spread over the A100s: {on}"
    return on


def whole_gpu_pod(cluster, name: str, wait_unschedulable: bool = True, still_waiting: bool = True) -> None:
    """A pod that needs a whole A100; with every A100 partly used, it waits (until something moves:
    under `--auto` it may be bound by the time its FailedScheduling Event is read)."""
    api = cluster.api
    pod = gpu_pod(name, scheduler="hami-scheduler", labels={"app": name, **SUITE}, gpu=1, mem=GPU_MEM)
    pod["metadata"]["annotations"] = dict(A100)
    api.create(pods_path(), pod)
    if wait_unschedulable:
        wait_for(
            f"{name} to be found unschedulable",
            lambda: _alive(cluster) or any(e["reason"] == "FailedScheduling" for e in events_for(api, name)),
            timeout=60,
            interval=0.5,
        )
        assert not still_waiting or not get_pod(api, name)["spec"].get("nodeName")


def plan_for(cluster, name: str, *extra: str) -> list[str]:
    exe = Path(sys.executable).parent / "hami-fast"
    admin = cluster.cp.kubeconfig("admin", cluster.cp.admin_token)
    return [
        str(exe) if exe.exists() else "hami-fast",
        "plan", "--live", "--for", f"{NS}/{name}", "--apply", "--interval", "0", "--move-timeout", "120",
        "--output", "json", "--kubeconfig", str(admin), *extra,
    ]  # fmt: skip


def test_plan_for_a_pending_pod_moves_a_deployment_pod_and_the_pending_pod_lands(cluster, descheduler):
    api = cluster.api
    t0 = time.monotonic()
    on = one_filler_per_gpu(cluster, "filler")
    whole_gpu_pod(cluster, "big")

    # The GPU map on the descheduler's port shows the pending pod and the move that unblocks it.
    shown = wait_for(
        "the GPU map to list big",
        lambda: next((q for q in live_map(descheduler)["pending"] if q["pod"] == f"{NS}/big"), None),
        timeout=30,
    )
    assert shown["placement"] and shown["placement"]["moves"] == 1 and shown["placement"]["node"] == NODE, shown

    # The plan for big, applied: one move through a HamiPodPlacement.
    done = subprocess.run(plan_for(cluster, "big"), capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, f"{done.stderr}\n{diagnose(api)}\n{logs(cluster)}"
    plan = json.loads(done.stdout)
    [move] = plan["moves"]
    target = plan["target"]
    assert plan["unblocked"] and target["node"] == NODE and len(target["gpus"]) == 1
    evicted = move["pod"].split("/", 1)[1]
    assert move["from"] == {"node": NODE, "gpus": target["gpus"]}, "the move clears the GPU big gets"
    assert on[target["gpus"][0]] == evicted

    # The moved pod went through the Eviction API (the chart's RBAC gives the descheduler no pod
    # delete) and is gone; its replacement was pinned to the move's target and landed there.
    with pytest.raises(ApiError) as gone:
        get_pod(api, evicted)
    assert gone.value.status == 404
    [placement] = [
        p for p in api.get(PLACEMENTS)["items"] if (p.get("spec") or {}).get("evictPod") == evicted
    ]  # fmt: skip
    status = placement["status"]
    assert status["phase"] == "Completed" and status.get("evictedAt"), status
    [replacement] = [
        p
        for p in pods_of(api, "filler")
        if p["metadata"]["name"] in {d["podName"] for d in status["assignmentDetails"]}
    ]
    stamp = replacement["metadata"]["annotations"]
    assert stamp["placement.hami.io/name"] == f"{NS}/{placement['metadata']['name']}"
    assert replacement["spec"]["nodeName"] == move["to"]["node"] == NODE
    assert [a[0] for a in allocations(replacement)] == move["to"]["gpus"] != target["gpus"]

    # The pending pod lands on the GPU the move freed.
    landed = wait_bound(cluster, "big", timeout=90)
    assert landed["spec"]["nodeName"] == NODE
    assert [a[0] for a in allocations(landed)] == target["gpus"], allocations(landed)
    print(f"\n[e2e] plan --for --apply: move and landing in {time.monotonic() - t0:.1f}s")
    remove_workloads(api)


RESERVATION = "hami-fast.io/reservation"


def test_the_descheduler_api_refuses_the_unauthenticated_and_the_unauthorised(cluster, descheduler):
    """The chart's settings on the real API server: HTTPS, TokenReview and SubjectAccessReview made
    by the descheduler's ServiceAccount (the chart's RBAC lets it), the `-descheduler-api`
    ClusterRole bound to a user through `descheduler.api.auth.subjects`."""
    from controlplane import API_NOBODY, API_VIEWER

    tokens = cluster.cp.tokens
    call = cluster.descheduler_api
    status, body = call("GET", "/api/v1/cluster-info", None)
    assert status == 401 and "bearer token" in body["error"]
    assert call("GET", "/api/v1/cluster-info", "no-such-token")[0] == 401
    status, body = call("GET", "/api/v1/cluster-info", tokens[API_NOBODY])
    assert status == 403 and f'user "{API_NOBODY}" cannot get on "descheduler/api"' in body["error"], body
    assert call("POST", "/api/v1/plan", tokens[API_NOBODY], b'{"max_moves": 1}')[0] == 403
    status, info = call("GET", "/api/v1/cluster-info", tokens[API_VIEWER])
    assert status == 200 and any(n["name"] == NODE for n in info["nodes"]), info
    status, plan = call("POST", "/api/v1/plan", tokens[API_VIEWER], b'{"max_moves": 1}')
    assert status == 200 and "moves" in plan, plan
    assert call("GET", "/healthz", None)[0] == 200, "health checks stay open for the kubelet"
    # What kubectl port-forward reaches: the pod's loopback listener, no token.
    with urllib.request.urlopen(f"http://127.0.0.1:{descheduler}/api/v1/cluster-info", timeout=10) as resp:
        assert resp.status == 200


def test_the_api_server_takes_every_gpu_id_hami_registers_and_refuses_what_breaks_annotations(cluster, descheduler):
    """The CRD's gpuDevices pattern as kube-apiserver applies it (Go's regexp), server-side dry run."""
    api = cluster.api

    def create(gpus: list[str]) -> int:
        body = {
            "apiVersion": "scheduling.hami.placement.com/v1",
            "kind": "HamiPodPlacement",
            "metadata": {"generateName": "ids-", "namespace": NS},
            "spec": {
                "reqID": "ids",
                "podSelector": {"matchLabels": {"app": "ids"}},
                "nodeName": NODE,
                "gpuDevices": gpus,
            },
        }
        try:
            api.create(PLACEMENTS + "?dryRun=All", body)
            return 201
        except ApiError as exc:
            assert exc.status != 422 or "spec.gpuDevices" in exc.body, exc.body
            return exc.status

    assert create(GPU_IDS_HAMI_REGISTERS) == 201
    refused = {repr(bad): create([bad]) for bad in GPU_IDS_THAT_BREAK_ANNOTATIONS}
    assert refused == {repr(bad): 422 for bad in GPU_IDS_THAT_BREAK_ANNOTATIONS}
    assert api.get(PLACEMENTS)["items"] == [], "a dry run stores nothing"


def test_gpus_freed_for_a_pending_pod_are_not_taken_by_another(cluster, descheduler):
    """A rival created while the move runs, asking for the same whole GPU, does not get it: the
    scheduler engine holds the freed GPU for the pending pod (`hami-fast.io/reservation`)."""
    api = cluster.api
    if (
        "--reservation-ttl"
        not in subprocess.run(plan_for(cluster, "x")[:2] + ["--help"], capture_output=True, text=True).stdout
    ):
        pytest.skip("reservations are not in this build (`hami-fast plan` has no --reservation-ttl)")
    one_filler_per_gpu(cluster, "filler2")
    whole_gpu_pod(cluster, "big2")
    run = subprocess.Popen(plan_for(cluster, "big2"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        held = wait_for(
            "big2's reservation",
            lambda: (get_pod(api, "big2")["metadata"].get("annotations") or {}).get(RESERVATION),
            timeout=60,
            interval=0.1,
        )
        whole_gpu_pod(cluster, "rival", wait_unschedulable=False)
        out, err = run.communicate(timeout=180)
    finally:
        run.kill()
    assert run.returncode == 0, f"{err}\n{diagnose(api)}\n{logs(cluster)}"
    target = json.loads(out)["target"]
    assert held == f"{target['node']}/{','.join(target['gpus'])}"
    landed = wait_bound(cluster, "big2", timeout=90)
    assert [a[0] for a in allocations(landed)] == target["gpus"]
    time.sleep(2)  # the rival had every chance at the freed GPU meanwhile
    rival = get_pod(api, "rival")
    assert not rival["spec"].get("nodeName"), f"the rival took {allocations(rival)}"
    remove_workloads(api)


# ---- `hami-fast descheduler --auto` ----------------------------------------------------------------
MOVABLE = {"hami-fast.io/movable": "true"}  # the default --selector
# The ConfigMap where --auto records the hour's moves (in the descheduler's namespace).
MOVES_RECORDS = "/api/v1/namespaces/hami-system/configmaps?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dhami-fast-descheduler-auto"


@pytest.fixture
def auto(cluster, descheduler):
    """`start(dry_run=False, **auto)`: the chart's descheduler restarted with `descheduler.auto`
    enabled (one pass a second) and these values. The chart's plain one again afterwards."""

    def start(dry_run: bool = False, **values: Any) -> int:
        auto_values = {"enabled": True, "period": "1s", **values}
        return cluster.restart_descheduler({"descheduler.auto": auto_values, "descheduler.dryRun": dry_run})

    cluster.api.delete(MOVES_RECORDS)  # each test starts with a fresh hour
    yield start
    remove_workloads(cluster.api)
    cluster.api.delete(MOVES_RECORDS)
    cluster.restart_descheduler()


def auto_passes(port: int, sample: str = "hami_fast_descheduler_auto_passes_total", label: str = "outcome"):
    """`hami_fast_descheduler_auto_passes_total` by outcome (or another counter by its label), from /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {
        s.labels[label]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == sample
    }


def auto_runs(port: int) -> dict[str, float]:
    """`hami_fast_descheduler_auto_runs_total` by result: runs of moves that ended."""
    return auto_passes(port, "hami_fast_descheduler_auto_runs_total", "result")


def passes_with(cluster, port: int, outcome: str, count: int, timeout: float = 60) -> None:
    """Wait until `count` more passes ended with `outcome` (the loop ran and decided)."""
    start = auto_passes(port).get(outcome, 0)
    wait_for(
        f"{count} auto passes with outcome {outcome}",
        lambda: _alive(cluster) or auto_passes(port).get(outcome, 0) >= start + count,
        timeout=timeout,
        interval=0.5,
    )


def placed(api) -> dict[str, tuple[str, str, str]]:
    """This module's pods: name -> (uid, node, first GPU)."""
    return {
        p["metadata"]["name"]: (p["metadata"]["uid"], p["spec"].get("nodeName", ""), (allocations(p) or [("",)])[0][0])
        for p in suite_pods(api)
    }


def completed(api, count: int) -> list[dict[str, Any]]:
    """This module's placements once all `count` of them are Completed (the pending pod may bind
    before the last moved pod's replacement does)."""

    def done():
        items = api.get(PLACEMENTS)["items"]
        assert len(items) <= count, diagnose(api)
        return items if sum((p.get("status") or {}).get("phase") == "Completed" for p in items) == count else None

    return wait_for(f"{count} placements Completed", done, timeout=60, interval=0.5)


def test_auto_moves_an_opted_in_pod_never_another_and_the_pending_pod_lands(cluster, auto):
    """One GPU runs a workload that did not opt in, the other an opted-in one: `--auto` frees the
    opted-in pod's GPU for the pending whole-GPU pod (through a HamiPodPlacement, as `plan
    --apply` does) and leaves the other workload alone."""
    api = cluster.api
    port = auto()
    t0 = time.monotonic()
    deployment(api, "stay", replicas=1, mem=4000)
    [stay] = allocated(api, "stay", 1)
    deployment(api, "mover", replicas=1, mem=4000, labels=MOVABLE)
    [mover] = allocated(api, "mover", 1)
    stay_gpu, mover_gpu = allocations(stay)[0][0], allocations(mover)[0][0]
    assert stay_gpu != mover_gpu, "GPU spread puts the two pods on different A100s"
    whole_gpu_pod(cluster, "big-auto", still_waiting=False)

    landed = wait_bound(cluster, "big-auto", timeout=120)
    assert landed["spec"]["nodeName"] == NODE
    assert [a[0] for a in allocations(landed)] == [mover_gpu], "big-auto got the GPU the move freed"
    [placement] = completed(api, 1)
    assert placement["spec"]["evictPod"] == mover["metadata"]["name"]
    assert placement["spec"]["gpuDevices"] == [stay_gpu]
    now = get_pod(api, stay["metadata"]["name"])
    assert now["metadata"]["uid"] == stay["metadata"]["uid"] and allocations(now)[0][0] == stay_gpu, "never moved"
    [replacement] = allocated(api, "mover", 1)
    assert replacement["metadata"]["uid"] != mover["metadata"]["uid"]
    assert allocations(replacement)[0][0] == stay_gpu
    # The run ends once it has seen the placement Completed (it polls every second).
    wait_for("the run counted", lambda: auto_runs(port)["moved"] >= 1, timeout=10, interval=0.3)
    assert auto_runs(port)["moved"] == 1 and auto_passes(port)["started"] == 1
    print(f"\n[e2e] --auto: pending to landed in {time.monotonic() - t0:.1f}s")


def test_auto_never_moves_a_workload_that_did_not_opt_in(cluster, auto):
    api = cluster.api
    port = auto()
    deployment(api, "stay", replicas=2, mem=4000)
    allocated(api, "stay", 2)
    whole_gpu_pod(cluster, "big-auto")
    before = placed(api)
    passes_with(cluster, port, "no_plan", 3)
    assert api.get(PLACEMENTS)["items"] == []
    assert placed(api) == before, "nothing moved"
    pending = get_pod(api, "big-auto")
    assert not pending["spec"].get("nodeName")
    assert not any(e["reason"] == "WouldMove" for e in events_for(api, "big-auto"))
    # What --auto reads: kube-scheduler's condition carries the extender's reason.
    [scheduled] = [c for c in pending["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled["reason"] == "Unschedulable" and "CardInsufficientMemory" in scheduled["message"], scheduled
    print(f"\n[e2e] PodScheduled: {scheduled['message']}")


def test_auto_dry_run_posts_would_move_and_moves_nothing(cluster, auto):
    api = cluster.api
    port = auto(dry_run=True)
    deployment(api, "mover", replicas=2, mem=4000, labels=MOVABLE)
    allocated(api, "mover", 2)
    whole_gpu_pod(cluster, "big-auto")
    before = placed(api)
    [event] = wait_for(
        "a WouldMove Event on big-auto",
        lambda: [e for e in events_for(api, "big-auto") if e["reason"] == "WouldMove"],
        timeout=60,
        interval=0.5,
    )
    assert event["source"] == "hami-fast-descheduler"
    assert (
        event["message"].startswith(f"dry run: would move {NS}/mover-")
        and f"then it fits on {NODE}/" in event["message"]
    )
    passes_with(cluster, port, "dry_run", 2)
    assert len([e for e in events_for(api, "big-auto") if e["reason"] == "WouldMove"]) == 1, "announced once"
    assert api.get(PLACEMENTS)["items"] == [] and placed(api) == before
    annotations = get_pod(api, "big-auto")["metadata"].get("annotations") or {}
    assert RESERVATION not in annotations, "a dry run holds nothing"


def test_auto_respects_max_moves_per_hour(cluster, auto):
    """Two opted-in pods on each A100: the whole-GPU pod needs two moves. One per hour moves
    nothing (a half-done unblocking would only disturb); two per hour unblock it."""
    api = cluster.api
    port = auto(maxMovesPerHour=1)
    deployment(api, "mover", replicas=4, mem=4000, labels=MOVABLE)
    pods = allocated(api, "mover", 4)
    per_gpu = sorted(allocations(p)[0][0] for p in pods)
    assert per_gpu == [f"GPU-{NODE}-0"] * 2 + [f"GPU-{NODE}-1"] * 2, per_gpu
    whole_gpu_pod(cluster, "big-auto")
    before = placed(api)
    passes_with(cluster, port, "no_plan", 3)
    assert api.get(PLACEMENTS)["items"] == [] and placed(api) == before

    port = auto(maxMovesPerHour=2, maxMovesPerPendingPod=2)
    landed = wait_bound(cluster, "big-auto", timeout=180)
    placements = completed(api, 2)
    assert len({p["spec"]["gpuDevices"][0] for p in placements}) == 1, "both moved onto the same GPU"
    assert allocations(landed)[0][0] not in {p["spec"]["gpuDevices"][0] for p in placements}
    passes_with(cluster, port, "budget_spent", 1)


def recorded_moves(api) -> list[dict[str, Any]]:
    """The hour's moves as `--auto` recorded them (its ConfigMap next to the Lease)."""
    items = api.get(MOVES_RECORDS)["items"]
    return [m for c in items for m in json.loads((c.get("data") or {}).get("moves") or "[]")]


def test_auto_budget_survives_deleted_placements_and_a_restart(cluster, auto):
    """`maxMovesPerHour: 1`: one move unblocks the pending pod. Its placement is deleted and the
    descheduler restarted; the same fragmentation again (a pending pod one move would unblock)
    gets no move within the hour: the record in the ConfigMap still counts the first."""
    api = cluster.api
    port = auto(maxMovesPerHour=1)
    deployment(api, "mover", replicas=2, mem=4000, labels=MOVABLE)
    allocated(api, "mover", 2)
    whole_gpu_pod(cluster, "big-auto", still_waiting=False)
    wait_bound(cluster, "big-auto", timeout=120)
    [placement] = completed(api, 1)
    wait_for("the run counted", lambda: auto_runs(port)["moved"] >= 1, timeout=10, interval=0.3)
    [entry] = recorded_moves(api)
    assert entry["reqID"] == placement["spec"]["reqID"] and entry["for"] == f"{NS}/big-auto"

    api.delete(PLACEMENTS)
    api.delete(pods_path("big-auto"))
    port = auto(maxMovesPerHour=1)
    # One mover pod off its GPU: its ReplicaSet's new pod takes the emptied GPU (spread), as at the start.
    movers = pods_of(api, "mover")
    api.delete(pods_path(movers[0]["metadata"]["name"]))
    wait_for(
        "the movers spread again",
        lambda: len({allocations(p)[0][0] for p in allocated(api, "mover", 2)}) == 2,
        timeout=90,
    )
    whole_gpu_pod(cluster, "big-again")
    passes_with(cluster, port, "budget_spent", 3)
    assert api.get(PLACEMENTS)["items"] == [], "no move: the hour's one move was made before the restart"
    assert not get_pod(api, "big-again")["spec"].get("nodeName")
    assert auto_passes(port)["started"] == 0 and len(recorded_moves(api)) == 1


def test_auto_moves_the_pods_of_an_opted_in_namespace(cluster, auto):
    """`namespaceSelector` instead of a pod label: the chart's RBAC lets the descheduler list namespaces."""
    api = cluster.api
    label = "hami-fast-e2e/movable"
    api.patch(f"/api/v1/namespaces/{NS}", {"metadata": {"labels": {label: "true"}}})
    try:
        port = auto(selector="", namespaceSelector=f"{label}=true")
        deployment(api, "mover", replicas=2, mem=4000)
        allocated(api, "mover", 2)
        whole_gpu_pod(cluster, "big-auto", still_waiting=False)
        wait_bound(cluster, "big-auto", timeout=120)
        [placement] = completed(api, 1)
        assert placement["spec"]["evictPod"].startswith("mover-")
        wait_for("the run counted", lambda: auto_runs(port)["moved"] >= 1, timeout=10, interval=0.3)
        assert auto_passes(port)["error"] == 0 and auto_runs(port)["error"] == 0
    finally:
        api.patch(f"/api/v1/namespaces/{NS}", {"metadata": {"labels": {label: None}}})


def distinct_gpus(api) -> bool:
    """No A100 of this module holds two whole-GPU-sized shares beyond its memory: every GPU's
    allocated memory, summed from the pods' annotations, fits in it."""
    used: dict[str, int] = {}
    for p in suite_pods(api):
        for uuid, mem, _cores in allocations(p):
            used[uuid] = used.get(uuid, 0) + mem
    return all(mem <= GPU_MEM for mem in used.values())


def restart_when_placed(cluster, component: str = "kube-apiserver") -> tuple[str, float]:
    """As soon as a move's HamiPodPlacement exists, restart `component`: the move is in flight
    (validated, evicting or waiting for its replacement). Its phase then, and the outage.

    kube-scheduler exits when it cannot renew its Lease (client-go's leader election); the kubelet
    would start its container again, so this does once the API server is back."""
    api, cp = cluster.api, cluster.cp
    placement = wait_for(
        "a placement", lambda: next(iter(api.get(PLACEMENTS)["items"]), None), timeout=90, interval=0.1
    )
    phase = (placement.get("status") or {}).get("phase") or "(none)"
    outage = cp.restart(component)
    scheduler = cp.procs["kube-scheduler"]
    deadline = time.monotonic() + 30  # past its renew deadline (10 s), in case it is still trying
    while time.monotonic() < deadline and scheduler.alive():
        time.sleep(0.5)
    if not scheduler.alive():
        print("\n[e2e] kube-scheduler exited (its Lease lost while the API server was down): restarted")
        scheduler.start()
    return phase, outage


def test_a_move_survives_the_api_server_restarting_mid_move(cluster, descheduler):
    """`plan --for --apply` is moving a pod when kube-apiserver restarts: the placement completes,
    the pending pod lands on the freed GPU, nothing is evicted twice or granted twice."""
    api = cluster.api
    try:
        on = one_filler_per_gpu(cluster, "filler")
        whole_gpu_pod(cluster, "big")
        cmd = plan_for(cluster, "big")
        mover = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        phase, outage = restart_when_placed(cluster)
        out, err = mover.communicate(timeout=300)
        assert mover.returncode == 0, f"{err}\n{diagnose(api)}\n{logs(cluster)}"
        [move] = json.loads(out)["moves"]
        landed = wait_bound(cluster, "big", timeout=120)
        [placement] = completed(api, 1)
        evicted = placement["spec"]["evictPod"]
        assert move["pod"] == f"{NS}/{evicted}" and evicted in on.values()
        assert [a[0] for a in allocations(landed)] == [k for k, v in on.items() if v == evicted]
        fillers = allocated(api, "filler", 2)
        assert evicted not in {p["metadata"]["name"] for p in fillers}, "the evicted pod is gone, replaced once"
        assert distinct_gpus(api), diagnose(api)
        print(
            f"\n[e2e] plan --apply: kube-apiserver restarted at phase {phase}, down {outage:.1f}s; the move completed"
        )
    finally:
        remove_workloads(api)


def test_auto_survives_the_api_server_restarting_mid_move(cluster, auto):
    """`--auto` started a move when kube-apiserver restarts: the run ends (moved), the pending pod
    lands, one placement, no second move for the same pod."""
    api = cluster.api
    port = auto()
    deployment(api, "mover", replicas=2, mem=4000, labels=MOVABLE)
    allocated(api, "mover", 2)
    whole_gpu_pod(cluster, "big-auto", still_waiting=False)
    phase, outage = restart_when_placed(cluster)
    landed = wait_bound(cluster, "big-auto", timeout=180)
    assert landed["spec"]["nodeName"] == NODE
    [placement] = completed(api, 1)
    assert placement["spec"]["evictPod"].startswith("mover-")
    wait_for("the run counted", lambda: auto_runs(port).get("moved", 0) >= 1, timeout=60, interval=0.5)
    assert auto_passes(port)["started"] == 1, "one run, not a second after the restart"
    assert len(recorded_moves(api)) == 1
    assert distinct_gpus(api), diagnose(api)
    print(f"\n[e2e] --auto: kube-apiserver restarted at phase {phase}, down {outage:.1f}s; the move completed")

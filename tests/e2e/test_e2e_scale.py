"""Scale on KWOK fake nodes (opt-in, see conftest.py): HAMi's real binary, hami-fast and kube-scheduler
alone (plain pods, no extender: the floor) in the same run on the same cluster.

Each run creates its pods at once (a realistic vGPU mix: fractional memory, cores, a memory
percentage, whole cards, two GPUs), measures time until all are bound, pods/s, p50 and p99
create-to-bind and API calls per pod (from the API server's audit log), then deletes them so the
next run meets the same empty cluster. At HAMi's default client limits (QPS 5 / burst 10) and with
limits raised for both. Every pod asks for `hami.io/node-scheduler-policy: spread` (both schedulers
honour it), so consecutive pods land on different nodes as a batch job spreads.

Sizes (env): HAMI_FAST_E2E_SCALE_NODES (CI: 100), _PODS (CI: 300), _DEFAULT_PODS (pods at the default
limits, CI: 20), _HAMI_BUDGET (seconds HAMi may take per run before its rate is taken from what it
bound), _ALLOCATE_DELAY (the device plugin stand-in's Allocate, default 0), _RUNS (a run named twice is measured twice,
in that order: alternate runs to spread the machine's load over them). `make bench-e2e` runs
1,000 nodes x 8 GPUs and 5,000 pods. Results: printed, and written to the folder $HAMI_FAST_E2E_RESULTS.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from pathlib import Path

import pytest
from controlplane import wait_for
from sidebyside import (
    ADMIN_USER,
    FAST,
    HAMI,
    HAMI_USER,
    KS_USER,
    KWOK_USER,
    PLUGIN_USER,
    PROTOCOL_USER,
    SA_USER,
    BindTracker,
    DevicePlugin,
    ProtocolWrites,
    SideBySide,
    audit_calls,
    audit_offset,
    control_plane,
    cpu_seconds,
    create_namespace,
    create_pods,
    delete_pods,
    device_usage,
    gpu_pod,
    log,
    mixed_limits,
    overcommitted,
    plain_pod,
    register_nodes,
    scrape,
    start_kwok,
    usage_differences,
    user_api,
)

NODES = int(os.environ.get("HAMI_FAST_E2E_SCALE_NODES", "100"))
GPUS = int(os.environ.get("HAMI_FAST_E2E_SCALE_GPUS", "8"))
PODS = int(os.environ.get("HAMI_FAST_E2E_SCALE_PODS", "300"))
DEFAULT_PODS = int(os.environ.get("HAMI_FAST_E2E_SCALE_DEFAULT_PODS", "20"))
HAMI_BUDGET = float(os.environ.get("HAMI_FAST_E2E_SCALE_HAMI_BUDGET", "90"))
ALLOCATE_DELAY = float(os.environ.get("HAMI_FAST_E2E_SCALE_ALLOCATE_DELAY", "0"))
RAISED = (
    int(os.environ.get("HAMI_FAST_E2E_SCALE_QPS", "1000")),
    int(os.environ.get("HAMI_FAST_E2E_SCALE_BURST", "2000")),
)
SPREAD = {"hami.io/node-scheduler-policy": "spread"}
FLOOR = "no-extender"
# The floor with HAMi's protocol: plain pods kube-scheduler binds alone, plus the test writing what
# HAMi's protocol writes per pod (sidebyside.ProtocolWrites) and the device-plugin stand-in's part.
FLOOR_WRITES = "no-extender+hami-writes"
FLOORS = (FLOOR, FLOOR_WRITES)
USERS = {HAMI: HAMI_USER, FAST: SA_USER, FLOOR: None, FLOOR_WRITES: PROTOCOL_USER}
SHORT = {HAMI_USER: "hami", SA_USER: "hami-fast", KS_USER: "kube-scheduler", KWOK_USER: "kwok"}
SHORT |= {PLUGIN_USER: "device-plugin stand-in", ADMIN_USER: "test (create, watch, delete)"}
SHORT |= {PROTOCOL_USER: "protocol writes (test)"}
# A run is a scheduler, optionally with extra `hami-fast serve` flags after a colon:
# hami-fast:--filter-patch-behind-answer measures the opt-in order side by side with the default.
RUNS = os.environ.get("HAMI_FAST_E2E_SCALE_RUNS", f"{FLOOR},{FAST},{HAMI}").split(",")


# The runs repeated at HAMi's default client limits (QPS 5 / burst 10); default: every extender run.
DEFAULT_RUNS = os.environ.get("HAMI_FAST_E2E_SCALE_DEFAULT_RUNS", ",".join(RUNS)).split(",")


def scheduler_of(run: str) -> tuple[str, list[str]]:
    which, _, flags = run.partition(":")
    return which, [f for f in flags.split(":") if f]


@pytest.fixture(scope="module")
def scale(e2e_workdir, require_kwok):
    cp = control_plane(e2e_workdir("scale"), apiserver_args=["--max-requests-inflight=800"], audit_extra=[ADMIN_USER])
    plugin = None
    try:
        cp.start()
        s = SideBySide(cp, qps=RAISED[0], burst=RAISED[1]).setup()
        start_kwok(cp)
        names = [f"kwok-{i:05d}" for i in range(NODES)]
        t0 = time.monotonic()
        register_nodes(cp.api, names, gpus=GPUS, labels={"type": "kwok"}, kwok=True)
        s.wait_nodes_registered(names, timeout=max(120, NODES))
        log(f"{NODES} KWOK nodes x {GPUS} GPUs registered with both schedulers in {time.monotonic() - t0:.0f}s")
        plugin = DevicePlugin(user_api(cp, PLUGIN_USER), delay=ALLOCATE_DELAY).start()
        s.plugin = plugin
        yield s
    finally:
        if plugin:
            plugin.stop()
        cp.stop()


def pods_for(run: str, namespace: str, n: int) -> list[dict]:
    if scheduler_of(run)[0] in FLOORS:
        return [plain_pod(f"plain-{i}", namespace) for i in range(n)]
    return [
        gpu_pod(f"{kind}-{i}", namespace, limits, annotations=SPREAD)
        for i, (kind, limits) in ((i, mixed_limits(i)) for i in range(n))
    ]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def calls_per_pod(calls: dict, pods: int) -> dict[str, dict[str, float]]:
    """{who: {"verb resource": calls per bound pod}}, watches left out, from the audit log."""
    out = {}
    for user, counter in sorted(calls.items()):
        kinds = {k: round(v / pods, 2) for k, v in counter.most_common() if not k.startswith("watch")}
        kinds = {k: v for k, v in kinds.items() if v >= 0.01}
        if kinds:
            out[SHORT.get(user, user)] = kinds
    return out


def drained_events(s: SideBySide, user: str, t0: float, offset: int, quiet: float = 3.0) -> int:
    """Events `user` created since t0, counted once it has posted none for `quiet` seconds (max 60 s)."""
    deadline, last, count = time.time() + 60, -1, 0
    while time.time() < deadline:
        calls = audit_calls(s.cp.audit_log, t0, time.time(), offset).get(user, {})
        count = calls.get("create events", 0)
        if count == last:
            return count
        last = count
        time.sleep(quiet)
    return count


def measure(s: SideBySide, run: str, n: int, limits: str, budget: float, repeat: int = 0) -> dict:
    """One run's pods at once; `repeat` > 0 for a run named again in RUNS (a namespace of its own)."""
    which, flags = scheduler_of(run)
    again = f"-{repeat + 1}" if repeat else ""
    namespace = re.sub(r"[^a-z0-9-]+", "-", f"{run}-{limits}".lower()).strip("-")[: 63 - len(again)] + again
    if which != HAMI:
        s.set_fast_args(flags)
    s.use(FAST if which in FLOORS else which)  # plain pods never reach the extender: any is fine
    create_namespace(s.api, namespace)
    tracker = BindTracker(s.api, namespace)
    writes = ProtocolWrites(user_api(s.cp, PROTOCOL_USER), namespace) if which == FLOOR_WRITES else None
    plugin: DevicePlugin = s.plugin
    pods = pods_for(run, namespace, n)
    creator = user_api(s.cp, ADMIN_USER)
    load_before = os.getloadavg()
    offset = audit_offset(s.cp.audit_log)
    cpu0 = cpu_seconds(s.cp)
    t0 = time.time()
    created = create_pods(creator, pods, threads=32)
    t_created = time.time()
    creator.close()

    def allocated() -> list[float]:
        return [t for k, t in list(plugin.finished.items()) if k.startswith(f"{namespace}/")]

    try:
        wait_for(f"{namespace}: {n} pods bound", lambda: len(tracker.bound) >= n, budget, 0.5)
        if which != FLOOR:  # and the device plugin's part done for each (bind-phase success, lock released)
            rest = budget - (time.time() - t0) if writes else 10
            wait_for(f"{namespace}: {n} pods allocated", lambda: len(allocated()) >= n, max(10, rest), 0.2)
    except TimeoutError:
        pass
    t1 = time.time()
    cpu1 = cpu_seconds(s.cp)
    load_after = os.getloadavg()
    tracker.stop()
    if writes:
        writes.stop()
    done = sorted(allocated())
    bound = sorted(tracker.bound.values())
    waits = [tracker.bound[k] - created[k] for k in tracker.bound]
    # Create to allocated (the device plugin's part done): where HAMi's protocol ends for a pod.
    allocated_waits = [t - created[k] for k, t in list(plugin.finished.items()) if k in created]
    time.sleep(2)  # the audit log's batch flush
    calls = audit_calls(s.cp.audit_log, t0, t1, offset)
    user = USERS[which]
    events = drained_events(s, user, t0, offset) if user else 0
    ext_calls = sum(v for kind, v in calls.get(user, {}).items() if not kind.startswith("watch")) if user else 0
    ks_calls = sum(v for kind, v in calls.get(KS_USER, {}).items() if not kind.startswith("watch"))
    elapsed = (bound[-1] - t0) if len(bound) >= n else (t1 - t0)
    if writes:  # this floor is done when the protocol's last write is: its rate counts completed pods
        elapsed = (done[-1] - t0) if len(done) >= n else (t1 - t0)
    cpu = {k: round(cpu1[k] - v, 1) for k, v in cpu0.items() if k in cpu1 and cpu1[k] - v >= 0.5}
    result = {
        "run": run,
        "limits": limits,
        "nodes": NODES,
        "pods": n,
        "bound": len(bound),
        "all_bound_s": round(bound[-1] - t0, 2) if len(bound) >= n else None,
        "create_s": round(t_created - t0, 2),
        "allocated": len(done),
        "all_allocated_s": round(done[-1] - t0, 2) if len(done) >= n else None,
        "pods_per_s": round((len(done) if writes else len(bound)) / elapsed, 2) if elapsed > 0 else None,
        "p50_s": round(statistics.median(waits), 3) if waits else None,
        "p99_s": round(percentile(waits, 0.99), 3) if waits else None,
        "p50_allocated_s": round(statistics.median(allocated_waits), 3) if allocated_waits else None,
        "p99_allocated_s": round(percentile(allocated_waits, 0.99), 3) if allocated_waits else None,
        "extender_calls_per_pod": round(ext_calls / max(1, len(bound)), 2),
        "kube_scheduler_calls_per_pod": round(ks_calls / max(1, len(bound)), 2),
        "calls_per_pod": calls_per_pod(calls, max(1, len(bound))),
        # Events are posted behind the answers: all the extender posted for this run, once it stopped.
        "extender_events_per_pod_drained": round(events / max(1, len(bound)), 2),
        "protocol_write_errors": writes.errors if writes else None,
        "cpu_s": cpu,
        "cpu_ms_per_pod": {k: round(1000 * v / max(1, len(bound)), 1) for k, v in cpu.items()},
        "load_before": [round(x, 1) for x in load_before],
        "load_after": [round(x, 1) for x in load_after],
        "load1": round(load_after[0], 1),
    }
    if which == FAST:
        text = scrape(s.metrics_ports[FAST])
        for route in ("filter", "bind", "webhook"):
            total = re.search(rf'hami_fast_request_duration_seconds_sum\{{route="{route}"\}} (\S+)', text)
            count = re.search(rf'hami_fast_request_duration_seconds_count\{{route="{route}"\}} (\S+)', text)
            if total and count and float(count[1]):
                result[f"mean_{route}_ms_cumulative"] = round(1000 * float(total[1]) / float(count[1]), 2)
    log(f"scale: {json.dumps(result)}")
    if which == FAST:
        assert overcommitted(device_usage(s.api)) == []
        wait_for(
            "hami-fast's gauges equal the API's allocations",
            lambda: not usage_differences(s.metric_usage(FAST), device_usage(s.api)),
            timeout=60,
            interval=2,
        )
    delete_pods(s.api, namespace, wait=max(120, n / 20))
    return result


def table(results: list[dict]) -> str:
    head = "| limits | scheduler | nodes | pods | bound | all bound (s) | all allocated (s) | pods/s | p50 / p99 to bound (s) | p50 / p99 to allocated (s) | extender calls/pod | kube-scheduler calls/pod |"
    rows = [head, "|" + "---|" * 12]
    for r in results:
        rows.append(
            f"| {r['limits']} | {r['run']} | {r['nodes']} | {r['pods']} | {r['bound']} | {r['all_bound_s'] or 'not all'} "
            f"| {r['all_allocated_s'] or (str(r['allocated']) + ' allocated' if r['allocated'] else '-')} "
            f"| {r['pods_per_s']} | {r['p50_s']} / {r['p99_s']} | {r['p50_allocated_s']} / {r['p99_allocated_s']} "
            f"| {r['extender_calls_per_pod']} | {r['kube_scheduler_calls_per_pod']} |"
        )
    return "\n".join(rows)


def breakdown(results: list[dict]) -> str:
    """Per run: API calls per bound pod by who and kind, and CPU ms per bound pod by component."""
    out = []
    for r in results:
        out.append(f"\n{r['limits']} {r['run']} (load {r['load_before']} -> {r['load_after']}):")
        for who, kinds in r["calls_per_pod"].items():
            total = round(sum(kinds.values()), 2)
            out.append(f"  calls/pod {who}: {total} = " + ", ".join(f"{k} {v}" for k, v in kinds.items()))
        out.append(f"  extender events/pod, all posted: {r['extender_events_per_pod_drained']}")
        cpu = sorted(r["cpu_ms_per_pod"].items(), key=lambda kv: -kv[1])
        out.append("  CPU ms/pod: " + ", ".join(f"{k} {v}" for k, v in cpu))
    return "\n".join(out)


def test_scale_side_by_side_with_hami_and_the_no_extender_floor(scale) -> None:
    results = []
    for k, run in enumerate(RUNS):
        budget = HAMI_BUDGET if scheduler_of(run)[0] == HAMI else max(120.0, PODS / 5)
        results.append(measure(scale, run, PODS, f"qps{RAISED[0]}", budget, RUNS[:k].count(run)))
    if DEFAULT_PODS:
        scale.set_client_limits(5, 10)
        for run in [r for r in dict.fromkeys(DEFAULT_RUNS) if scheduler_of(r)[0] not in FLOORS]:
            budget = HAMI_BUDGET if scheduler_of(run)[0] == HAMI else max(120.0, DEFAULT_PODS * 3)
            results.append(measure(scale, run, DEFAULT_PODS, "qps5", budget))
    text = table(results) + "\n" + breakdown(results)
    print("\n" + text)
    out = os.environ.get("HAMI_FAST_E2E_RESULTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "scale.json").write_text(json.dumps(results, indent=2) + "\n")
        (Path(out) / "scale.md").write_text(text + "\n")
    by = {(r["run"], r["limits"]): r["bound"] for r in results}
    raised = f"qps{RAISED[0]}"
    assert by.get((FLOOR, raised), PODS) == PODS
    for run in RUNS:
        if scheduler_of(run)[0] == FAST:
            assert by.get((run, raised), PODS) == PODS, f"{run} bound every pod"
    assert by.get((HAMI, raised), 1) > 0, "HAMi's binary scheduled on this cluster too"
    assert by.get((FAST, "qps5"), DEFAULT_PODS) == DEFAULT_PODS

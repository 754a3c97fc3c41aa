"""Schedule-to-bind against the test API server (real HTTP, official client): pods per second with
HAMi's default client limits (QPS 5, burst 10) and with the limit lifted. Every API call the scheduler
makes goes through the one rate-limited client, so the limit bounds throughput.
"""

from __future__ import annotations

import tempfile
import time

import pytest
from k8s_objects import bind_args, filter_args, gpu_node, gpu_pod
from kubeapi.fixtures import start_kubeapi, stop_kubeapi, wait_for
from serving import Service

NODES = 40


@pytest.mark.parametrize(("qps", "burst", "pods"), [(5, 10, 12), (0, 1000, 40)])
def test_schedule_to_bind(benchmark, qps: float, burst: int, pods: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        api = start_kubeapi(tmp)
        try:
            names = [f"node-{i:02d}" for i in range(NODES)]
            for n in names:
                api.create(gpu_node(n))
            objs = [api.create(gpu_pod(f"p{i}", gpu=1, mem=1000, cores=10)) for i in range(pods)]
            with Service(
                kubeconfig=api.kubeconfig, kube_qps=qps, kube_burst=burst, node_scheduler_policy="spread"
            ) as svc:
                wait_for(lambda: svc.runtime.scheduler.ready(), 15, "sync")
                api.clear_log()

                def schedule_all() -> float:
                    start = time.perf_counter()
                    for pod in objs:
                        node = svc.post("/filter", filter_args(pod, names))["NodeNames"][0]
                        assert svc.post("/bind", bind_args(pod, node))["Error"] == ""
                    return time.perf_counter() - start

                elapsed = benchmark.pedantic(schedule_all, rounds=1, iterations=1)
                calls = {verb: api.count(verb) for verb in ("GET", "PATCH", "POST")}
        finally:
            stop_kubeapi(api)
    benchmark.group = "schedule-to-bind, test API server"
    benchmark.extra_info.update(
        {"qps": qps, "pods_per_s": round(pods / elapsed, 2), **{f"{k}_calls": v for k, v in calls.items()}}
    )
    print(f"\nqps={qps or 'unlimited'} burst={burst}: {pods / elapsed:.2f} pods/s; API calls {calls} for {pods} pods")

"""hami-fast serve as its own process, killed with SIGKILL mid-run and restarted: every allocation the
API server holds is accounted again, none twice. Usage is read from outside, through /metrics."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict

import orjson
import pytest
from k8s_objects import bind_args, filter_args, gpu_node, gpu_pod
from kubeapi.fixtures import wait_for
from serving import free_port

MIB = 1048576


def start(kubeconfig: str, port: int, metrics: int, *extra: str) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "hami_fast.cli",
        "serve",
        "--kubeconfig",
        kubeconfig,
        "--http_bind",
        f"127.0.0.1:{port}",
        "--metrics-bind-address",
        f"127.0.0.1:{metrics}",
        "--kube-qps",
        "0",
        "--watch-timeout",
        "5",
        *extra,
    ]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, b""
    except OSError:
        return 0, b""


def post(port: int, route: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{route}",
        data=orjson.dumps(body),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        return orjson.loads(r.read())


def allocated_from_metrics(metrics: int) -> dict[str, int]:
    text = get(f"http://127.0.0.1:{metrics}/metrics")[1].decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("hami_gpu_memory_allocated_bytes{"):
            uuid = re.search(r'device_uuid="([^"]+)"', line).group(1)
            out[uuid] = int(float(line.rsplit(" ", 1)[1])) // MIB
    return out


def allocated_from_api(kubeapi) -> dict[str, int]:
    totals: dict[str, int] = defaultdict(int)
    for pod in kubeapi.list("pods"):
        value = (pod["metadata"].get("annotations") or {}).get("hami.io/vgpu-devices-allocated", "")
        for device in filter(None, value.replace(";", ":").split(":")):
            uuid, _, mem, _ = device.split(",")
            totals[uuid] += int(mem)
    return dict(totals)


@pytest.mark.parametrize("allocation_write", ["filter", "bind", "binding"])
def test_sigkill_and_restart_loses_no_allocation(kubeapi, allocation_write) -> None:
    """HAMi's order (filter): a filtered, unbound pod's allocation is on the API and survives. The
    default (bind), and binding: it is only in memory until Bind writes it with bind-phase, so after the
    SIGKILL nothing holds it, the Bind guard refuses its Bind and a new Filter grants it once."""
    names = [f"node-{i}" for i in range(3)]
    for n in names:
        kubeapi.create(gpu_node(n, gpus=2, memory=16384))
    pods = [kubeapi.create(gpu_pod(f"p{i}", gpu=1, mem=1000 + 100 * i, cores=5)) for i in range(12)]
    port, metrics = free_port(), free_port()
    mode = f"--allocation-write={allocation_write}"
    proc = start(kubeapi.kubeconfig, port, metrics, mode)
    try:
        wait_for(lambda: get(f"http://127.0.0.1:{port}/readyz")[0] == 200, 30, "first start ready", interval=0.2)
        for pod in pods[:8]:
            node = post(port, "/filter", filter_args(pod, names))["NodeNames"][0]
            post(port, "/bind", bind_args(pod, node))
            kubeapi.patch(
                "nodes", node, {"metadata": {"annotations": {"hami.io/mutex.lock": None}}}
            )  # the device plugin's part
        unbound = {}
        for pod in pods[8:10]:  # filtered (annotated in HAMi's order) but never bound
            [unbound[pod["metadata"]["name"]]] = post(port, "/filter", filter_args(pod, names))["NodeNames"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        expected = allocated_from_api(kubeapi)
        held = 10 if allocation_write == "filter" else 8
        assert sum(expected.values()) == sum(1000 + 100 * i for i in range(held))

        proc = start(kubeapi.kubeconfig, port, metrics, mode)
        wait_for(lambda: get(f"http://127.0.0.1:{port}/readyz")[0] == 200, 30, "restart ready", interval=0.2)
        seen = wait_for(
            lambda: (m := allocated_from_metrics(metrics)) and {k: v for k, v in m.items() if v} or None, 10, "metrics"
        )
        assert seen == expected
        if allocation_write != "filter":  # the answers given before the kill bind nothing now
            for pod in pods[8:10]:
                answer = post(port, "/bind", bind_args(pod, unbound[pod["metadata"]["name"]]))
                assert "no allocation" in answer["Error"], answer
                assert not kubeapi.get("pods", pod["metadata"]["name"], "default")["spec"].get("nodeName")
            assert {k: v for k, v in allocated_from_metrics(metrics).items() if v} == expected
            for pod in pods[8:10]:  # kube-scheduler schedules them again
                node = post(port, "/filter", filter_args(pod, names))["NodeNames"][0]
                assert post(port, "/bind", bind_args(pod, node)) == {"Error": ""}
                kubeapi.patch("nodes", node, {"metadata": {"annotations": {"hami.io/mutex.lock": None}}})
        # Scheduling continues on top of the recovered state without double-granting.
        for pod in pods[10:]:
            assert post(port, "/filter", filter_args(pod, names))["NodeNames"]
        after = {k: v for k, v in allocated_from_metrics(metrics).items() if v}
        if allocation_write == "filter":
            assert after == allocated_from_api(kubeapi)
        else:  # pods[10:] are filtered, not written: the engine holds them on top of the API's allocations
            api = allocated_from_api(kubeapi)
            assert sum(api.values()) == sum(1000 + 100 * i for i in range(10))
            assert sum(after.values()) == sum(1000 + 100 * i for i in range(12))
            assert all(after.get(uuid, 0) >= mem for uuid, mem in api.items())
    finally:
        proc.kill()
        proc.wait(10)


def test_slow_api_server_still_binds(kubeapi) -> None:
    kubeapi.create(gpu_node("slow-node"))
    pod = kubeapi.create(gpu_pod("slow", gpu=1, mem=100))
    port, metrics = free_port(), free_port()
    proc = start(kubeapi.kubeconfig, port, metrics)
    try:
        wait_for(lambda: get(f"http://127.0.0.1:{port}/readyz")[0] == 200, 30, "ready", interval=0.2)
        kubeapi.delay("PATCH", "/api/v1/nodes/slow-node", 1.0)  # the node lock (and any handshake write)
        kubeapi.delay("PATCH", "/api/v1/namespaces/default/pods/slow", 0.5, times=2)
        kubeapi.delay("POST", "/api/v1/namespaces/default/pods/slow/binding", 0.5)
        start_time = time.monotonic()
        assert post(port, "/filter", filter_args(pod, ["slow-node"]))["NodeNames"] == ["slow-node"]
        assert post(port, "/bind", bind_args(pod, "slow-node")) == {"Error": ""}
        assert time.monotonic() - start_time >= 1.5
        assert kubeapi.get("pods", "slow", "default")["spec"]["nodeName"] == "slow-node"
    finally:
        proc.kill()
        proc.wait(10)

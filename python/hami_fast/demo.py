"""The built-in demo cluster: GPU nodes as HAMi's device plugin registers them, and a stream of demo pods."""

from __future__ import annotations

import asyncio
import base64
import http.client
import random
import socket
import statistics
import sys
import threading
import time
from collections import Counter
from typing import Any

import orjson

GPU_MODELS = [
    ("NVIDIA A100-SXM4-80GB", 81920, 8),
    ("NVIDIA-Tesla V100-PCIE-32GB", 32768, 4),
    ("NVIDIA-Tesla T4", 15360, 2),
]


def demo_node(i: int, rng: random.Random) -> dict[str, Any]:
    model, memory, gpus = GPU_MODELS[i % len(GPU_MODELS)]
    name = f"demo-gpu-{i:03d}"
    devices = [
        {
            "id": f"GPU-{i:04d}{g:04d}-demo",
            **({"index": g} if g else {}),
            "count": 10,
            "devmem": memory,
            "devcore": 100,
            "type": model,
            **({"numa": g * 2 // gpus} if g * 2 // gpus else {}),
            "mode": "hami-core",
            "health": True,
        }
        for g in range(gpus)
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"gpu": "on"},
            "annotations": {"hami.io/node-nvidia-register": orjson.dumps(devices).decode()},
        },
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus * 10), "cpu": "96", "memory": "768Gi"}},
    }


def demo_nodes(count: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [demo_node(i, rng) for i in range(count)]


def demo_pod(i: int, rng: random.Random) -> dict[str, Any]:
    shape = rng.choice(["share-small", "share-small", "share-mid", "whole", "percent", "multi"])
    limits: dict[str, Any] = {
        "share-small": {
            "nvidia.com/gpu": "1",
            "nvidia.com/gpumem": str(rng.choice([1024, 2048, 4096])),
            "nvidia.com/gpucores": str(rng.choice([10, 20, 30])),
        },
        "share-mid": {
            "nvidia.com/gpu": "1",
            "nvidia.com/gpumem": str(rng.choice([8192, 12288])),
            "nvidia.com/gpucores": "50",
        },
        "whole": {"nvidia.com/gpu": "1"},
        "percent": {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": str(rng.choice([25, 50]))},
        "multi": {"nvidia.com/gpu": str(rng.choice([2, 4])), "nvidia.com/gpumem": "8192", "nvidia.com/gpucores": "40"},
    }[shape]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"demo-{shape}-{i:04d}",
            "namespace": "demo",
            "uid": f"demo-uid-{i:06d}",
            "labels": {"app": "demo"},
        },
        "spec": {
            "schedulerName": "hami-scheduler",
            "containers": [{"name": "main", "image": "cuda:12", "resources": {"limits": limits}}],
        },
    }


def demo_pods(count: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed + 1)
    return [demo_pod(i, rng) for i in range(count)]


def apply_json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Just enough RFC 6902 (add/replace) to play kube-apiserver's part for the webhook's patch."""
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target: Any = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target.append(op["value"]) if last == "-" else target.insert(int(last), op["value"])
        else:
            target[last] = op["value"]
    return doc


class Driver:
    """Plays kube-apiserver and kube-scheduler against a running hami-fast over HTTP."""

    def __init__(self, host: str, port: int) -> None:
        self.conn = http.client.HTTPConnection(host, port, timeout=30)
        self.latency: dict[str, list[float]] = {"webhook": [], "filter": [], "bind": []}

    def post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        data = orjson.dumps(body)
        start = time.perf_counter()
        self.conn.request("POST", f"/{route}", body=data, headers={"Content-Type": "application/json"})
        answer = self.conn.getresponse().read()
        self.latency[route].append(time.perf_counter() - start)
        return orjson.loads(answer)

    def schedule(self, pod: dict[str, Any], node_names: list[str]) -> tuple[str | None, str]:
        review = self.post(
            "webhook",
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"uid": pod["metadata"]["uid"], "namespace": "demo", "object": pod},
            },
        )
        response = review["response"]
        if not response["allowed"]:
            return None, f"denied: {response['status']['message']}"
        if response.get("patch"):
            apply_json_patch(pod, orjson.loads(base64.b64decode(response["patch"])))
        result = self.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": node_names})
        if result["Error"] or not result["NodeNames"]:
            reasons = Counter(r.split(", ")[0] for r in (result["FailedNodes"] or {}).values())
            return None, result["Error"] or f"pending: {dict(reasons.most_common(2))}"
        node = result["NodeNames"][0]
        meta = pod["metadata"]
        bound = self.post(
            "bind", {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
        )
        return (node, "bound") if not bound["Error"] else (None, f"bind failed: {bound['Error']}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def run(args: Any) -> int:
    """Start hami-fast on the demo cluster, then drive demo pods through /webhook, /filter and /bind."""
    from hami_fast.config import Config
    from hami_fast.server import logs
    from hami_fast.server.serve import build_runtime, run_http

    logs.setup("warning")
    port = _free_port()
    config = Config(http_bind=f"127.0.0.1:{port}", metrics_bind_address="", demo=True)
    runtime = build_runtime(config)
    ready = threading.Event()
    server = threading.Thread(target=lambda: asyncio.run(run_http(runtime, ready)), name="hami-fast", daemon=True)
    server.start()
    if not ready.wait(15):
        print("hami-fast did not start", file=sys.stderr)
        return 1
    print(
        f"hami-fast serving the built-in demo cluster on http://127.0.0.1:{port} ({runtime.cluster.node_count()} GPU nodes)"
    )
    node_names = sorted(n["name"] for n in orjson.loads(runtime.cluster.usage()))
    driver = Driver("127.0.0.1", port)
    placed: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    for pod in demo_pods(args.pods, args.seed):
        node, outcome = driver.schedule(pod, node_names)
        outcomes[outcome.split(":")[0]] += 1
        if node:
            placed[node] += 1
        devices = (
            runtime.memory.get_pod("demo", pod["metadata"]["name"])["metadata"].get("annotations", {})
            if node and runtime.memory
            else {}
        ).get("hami.io/vgpu-devices-allocated", "")
        print(f"{pod['metadata']['name']:<24} -> {node or '-':<13} {outcome if not node else devices}")
    runtime.stop.set()
    server.join(timeout=10)
    print(f"\n{args.pods} pods: {dict(outcomes)}; {len(placed)} of {len(node_names)} nodes used")
    for route, values in driver.latency.items():
        print(
            f"  {route:<8} over HTTP: median {statistics.median(values) * 1e3:.2f} ms, p99 {_percentile(values, 0.99) * 1e3:.2f} ms ({len(values)} calls)"
        )
    return 0

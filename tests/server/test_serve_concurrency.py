"""Many pods filtered and bound at once: no device is ever over-committed, no exclusive card shared."""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import orjson
from k8s_objects import bind_args, filter_args, gpu_node, gpu_pod
from kubeapi.fixtures import wait_for
from serving import Service

LOCK = "hami.io/mutex.lock"


class DevicePlugin(threading.Thread):
    """Plays the device plugin's part: once a locked pod is bound, mark it allocated and release the lock."""

    def __init__(self, kubeapi, nodes: list[str]) -> None:
        super().__init__(daemon=True)
        self.kubeapi, self.nodes = kubeapi, nodes
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for name in self.nodes:
                node = self.kubeapi.get("nodes", name)
                value = (node["metadata"].get("annotations") or {}).get(LOCK)
                if not value:
                    continue
                _, ns, pod_name = value.split(",")
                pod = self.kubeapi.get("pods", pod_name, ns)
                if pod is None or pod["spec"].get("nodeName"):
                    if pod is not None:
                        self.kubeapi.patch(
                            "pods",
                            pod_name,
                            {
                                "metadata": {"annotations": {"hami.io/bind-phase": "success"}},
                                "status": {"phase": "Running"},
                            },
                            ns,
                        )
                    self.kubeapi.patch("nodes", name, {"metadata": {"annotations": {LOCK: None}}})
            self.stop.wait(0.01)


def random_pod(i: int, rng: random.Random) -> dict:
    shape = rng.choice(["small", "small", "mid", "whole", "pair"])
    limits = {
        "small": {"gpu": 1, "mem": rng.choice([1000, 2000, 3000]), "cores": rng.choice([10, 20, 30])},
        "mid": {"gpu": 1, "mem": 6000, "cores": 50},
        "whole": {"gpu": 1, "cores": 100},
        "pair": {"gpu": 2, "mem": 4000, "cores": 25},
    }[shape]
    return gpu_pod(f"pod-{i:03d}", namespace=f"ns{i % 3}", **limits)


def test_200_pods_onto_20_nodes_never_overcommit(kubeapi) -> None:
    nodes = [f"node-{i:02d}" for i in range(20)]
    for n in nodes:
        kubeapi.create(gpu_node(n, gpus=2, memory=16384, count=4))
    rng = random.Random(3)
    pods = [kubeapi.create(random_pod(i, rng)) for i in range(200)]
    plugin = DevicePlugin(kubeapi, nodes)
    plugin.start()
    try:
        with Service(kubeconfig=kubeapi.kubeconfig, kube_qps=0, kube_burst=1000) as svc:
            wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")

            def schedule(pod: dict) -> str | None:
                for _ in range(200):
                    result = svc.post("/filter", filter_args(pod, nodes))
                    if not result["NodeNames"]:
                        return None
                    node = result["NodeNames"][0]
                    if svc.post("/bind", bind_args(pod, node))["Error"] == "":
                        return node
                    threading.Event().wait(0.02)
                raise AssertionError(f"{pod['metadata']['name']} never bound")

            with ThreadPoolExecutor(max_workers=16) as pool:
                placed = list(pool.map(schedule, pods))
            bound = [p for p in placed if p]
            assert len(bound) >= 60, len(bound)
            engine_usage = orjson.loads(svc.cluster.usage())
    finally:
        plugin.stop.set()
        plugin.join(5)

    # Recompute usage independently from what the API server holds.
    per_device: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for pod in kubeapi.list("pods"):
        annotations = pod["metadata"].get("annotations") or {}
        if not pod["spec"].get("nodeName"):
            continue
        assert annotations["hami.io/vgpu-node"] == pod["spec"]["nodeName"]
        for slot in annotations["hami.io/vgpu-devices-allocated"].split(";"):
            for device in filter(None, slot.split(":")):
                uuid, _, mem, cores = device.split(",")
                assert uuid.startswith(f"GPU-{pod['spec']['nodeName']}-")
                per_device[uuid].append((int(mem), int(cores)))
    assert sum(len(v) for v in per_device.values()) >= len(bound)
    for uuid, uses in per_device.items():
        assert len(uses) <= 4, f"{uuid}: {len(uses)} tasks > 4 slots"
        assert sum(m for m, _ in uses) <= 16384, f"{uuid}: memory over-committed"
        assert sum(c for _, c in uses) <= 100, f"{uuid}: cores over-committed"
        if any(c == 100 for _, c in uses):
            assert len(uses) == 1, f"{uuid}: exclusive card shared"
    engine = {d["uuid"]: (d["used"], d["usedmem"]) for n in engine_usage for d in n["devices"]}
    for uuid, uses in per_device.items():
        assert engine[uuid] == (len(uses), sum(m for m, _ in uses)), uuid

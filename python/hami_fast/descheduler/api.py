"""REST API on 8083 (RSGI app for Granian): cluster-info, placements, fragmentation, plan (dry run),
plus the pinning webhook on POST /webhook. Read-only apart from the webhook's placement claims."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from hami_fast import _native
from hami_fast.descheduler import kube as k
from hami_fast.descheduler.gpumap import GpuMap
from hami_fast.descheduler.webhook import Pinner
from hami_fast.kube.client import KubeClient
from hami_fast.server.router import HttpError, Route, Router, json_body


class Source:
    """Where the API reads the cluster: the live API server, or a fixed snapshot (offline)."""

    def __init__(
        self,
        client: KubeClient | None = None,
        snapshot: bytes | None = None,
        config: bytes | None = None,
        max_age: float = 2.0,
    ) -> None:
        self.client, self.snapshot, self.config, self.max_age = client, snapshot, config, max_age
        self._cached: tuple[float, list[bytes]] | None = None
        self._lock = threading.Lock()

    def inputs(self) -> list[bytes]:
        """Nodes and pods as LIST bytes; one LIST pair serves every request within `max_age` seconds."""
        if self.client is None:
            return [self.snapshot or b'{"kind": "List", "items": []}']
        with self._lock:
            now = time.monotonic()
            if self._cached is None or now - self._cached[0] > self.max_age:
                self._cached = (now, k.snapshot_inputs(self.client))
            return self._cached[1]

    def placements(self) -> list[dict[str, Any]]:
        return k.list_placements(self.client) if self.client is not None else []


def cluster_info(source: Source, leading: bool) -> dict[str, Any]:
    inputs = source.inputs()
    cluster = _native.Cluster(source.config)
    for blob in inputs:
        cluster.apply(blob)
    usage = orjson.loads(cluster.usage())
    frag = orjson.loads(_native.fragmentation(inputs, source.config))
    nodes = []
    for n in usage:
        devices = []
        for d in n["devices"]:
            devices.append(
                {
                    "name": f"gpu-{d['index']}",
                    "index": d["index"],
                    "uuid": d["uuid"],
                    "type": d["type"],
                    "numa": d["numa"],
                    "health": d["health"],
                    "cordoned": d["cordoned"],
                    "capacity": {"shares": d["count"], "memoryMiB": d["devmem"], "cores": d["devcore"]},
                    "used": {"shares": d["used"], "memoryMiB": d["usedmem"], "cores": d["usedcores"]},
                    "free": {
                        "shares": d["count"] - d["used"],
                        "memoryMiB": d["devmem"] - d["usedmem"],
                        "cores": d["devcore"] - d["usedcores"],
                    },
                }
            )
        nodes.append({"name": n["name"], "registered": n["registered"], "error": n["error"], "devices": devices})
    gpus = [d for n in nodes for d in n["devices"]]
    return {
        "generatedAt": k.now_rfc3339(),
        "schedulerName": k.SCHEDULER_NAME,
        "health": {"kubeAPI": "ok" if source.client is not None else "snapshot", "leader": leading},
        "nodes": nodes,
        "summary": {
            "nodes": len(nodes),
            "gpus": len(gpus),
            "healthyGpus": sum(1 for d in gpus if d["health"]),
            "fullyFreeGpus": frag["cluster"]["free_whole_gpus"],
            "fragmentation": frag["cluster"],
        },
    }


def placements(source: Source) -> dict[str, Any]:
    items, allocations = [], []
    for p in source.placements():
        meta, spec, status = p["metadata"], p.get("spec") or {}, p.get("status") or {}
        items.append(
            {
                "namespace": meta["namespace"],
                "name": meta["name"],
                "reqID": spec.get("reqID"),
                "podSelector": spec.get("podSelector"),
                "nodeName": spec.get("nodeName"),
                "gpuDevices": spec.get("gpuDevices"),
                "resolvedUUIDs": status.get("resolvedUUIDs", []),
                "evictPod": spec.get("evictPod"),
                "phase": status.get("phase", ""),
                "claimedBy": status.get("claimedBy"),
                "assignmentDetails": status.get("assignmentDetails", []),
                "consumedAt": status.get("consumedAt"),
                "message": status.get("message", ""),
            }
        )
        for detail in status.get("assignmentDetails") or []:
            allocations.append(
                {
                    "pod": f"{meta['namespace']}/{detail['podName']}",
                    "placement": f"{meta['namespace']}/{meta['name']}",
                    "node": spec.get("nodeName"),
                    "gpuDevice": detail["gpuDevice"],
                    "result": status.get("phase"),
                }
            )
    return {"items": items, "allocations": allocations}


VALIDATE_SHAPE = '{"pod": "ns/name", "nodeName": .., "gpuDevices": [..]}'
OK = b'{"status": "ok"}'


class ApiApp(Router):
    """The REST API and the GPU map; `webhook`: also the pinning webhook (when it has no listener of its own)."""

    def __init__(
        self,
        source: Source,
        pinner: Pinner | None,
        leading: Callable[[], bool],
        executor: ThreadPoolExecutor,
        webhook: bool = True,
    ) -> None:
        self.source, self.pinner, self.leading = source, pinner, leading
        super().__init__(
            [
                Route("GET", "/api/v1/cluster-info", lambda _: orjson.dumps(cluster_info(self.source, self.leading()))),
                Route("GET", "/api/v1/placements", lambda _: orjson.dumps(placements(self.source))),
                Route("GET", "/api/v1/fragmentation", self.fragmentation),
                Route("POST", "/api/v1/plan", self.plan),
                Route("POST", "/api/v1/placements/validate", self.validate),
                *([Route("POST", "/webhook", self.webhook)] if webhook else []),
                *health_routes(),
                *GpuMap(source, leading).routes(),
            ],
            executor,
            name="descheduler",
        )

    def fragmentation(self, _: bytes) -> bytes:
        return _native.fragmentation(self.source.inputs(), self.source.config)

    def plan(self, body: bytes) -> bytes:
        json_body(body)
        return _native.plan(self.source.inputs(), body.strip() or b"{}", self.source.config)

    def validate(self, body: bytes) -> bytes:
        """Dry-fit a placement target: `{"pod": "ns/name", "nodeName": .., "gpuDevices": [..]}`."""
        req = json_body(body)
        try:
            pod, node, gpus = str(req.get("pod", "")), str(req["nodeName"]), [str(g) for g in req["gpuDevices"]]
        except KeyError as exc:
            raise HttpError(400, f"request body: field {exc} is required; want {VALIDATE_SHAPE}") from None
        except (TypeError, AttributeError) as exc:
            raise HttpError(400, f"request body: want {VALIDATE_SHAPE}: {exc}") from None
        return _native.validate_target(self.source.inputs(), pod, node, gpus, self.source.config)

    def webhook(self, body: bytes) -> bytes:
        return (self.pinner or Pinner(None)).admit(body)


def health_routes() -> list[Route]:
    return [Route("GET", "/healthz", lambda _: OK, "inline"), Route("GET", "/readyz", lambda _: OK, "inline")]


def webhook_app(pinner: Pinner | None, executor: ThreadPoolExecutor) -> Router:
    """The webhook's own listener: `/webhook` and the health checks, nothing of the API."""
    admit = (pinner or Pinner(None)).admit
    return Router([Route("POST", "/webhook", admit), *health_routes()], executor, name="descheduler-webhook")

"""REST API on 8083 (RSGI app for Granian): cluster-info, placements, fragmentation, plan (dry run),
plus the pinning webhook on POST /webhook. Read-only apart from the webhook's placement claims."""

from __future__ import annotations

import asyncio
import logging
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
from hami_fast.kube.client import ApiError, KubeClient

log = logging.getLogger("hami_fast.descheduler.api")

JSON_HEADERS = [("content-type", "application/json")]
MAX_BODY = 4 * 1024 * 1024


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


class ApiApp:
    def __init__(
        self, source: Source, pinner: Pinner | None, leading: Callable[[], bool], executor: ThreadPoolExecutor
    ) -> None:
        self.source, self.pinner, self.leading, self.executor = source, pinner, leading, executor
        self.routes: dict[str, tuple[str, Callable[[bytes], tuple[int, bytes]]]] = {
            "/api/v1/cluster-info": ("GET", lambda _: (200, orjson.dumps(cluster_info(self.source, self.leading())))),
            "/api/v1/placements": ("GET", lambda _: (200, orjson.dumps(placements(self.source)))),
            "/api/v1/fragmentation": (
                "GET",
                lambda _: (200, _native.fragmentation(self.source.inputs(), self.source.config)),
            ),
            "/api/v1/plan": ("POST", self.plan),
            "/api/v1/placements/validate": ("POST", self.validate),
            "/webhook": ("POST", self.webhook),
            "/healthz": ("GET", lambda _: (200, b'{"status": "ok"}')),
            "/readyz": ("GET", lambda _: (200, b'{"status": "ok"}')),
        }
        self.routes.update(GpuMap(source, leading).routes())

    def plan(self, body: bytes) -> tuple[int, bytes]:
        options = body.strip() or b"{}"
        try:
            orjson.loads(options)
        except orjson.JSONDecodeError as exc:
            return 400, orjson.dumps({"error": f"request body: not JSON: {exc}"})
        return 200, _native.plan(self.source.inputs(), options, self.source.config)

    def validate(self, body: bytes) -> tuple[int, bytes]:
        """Dry-fit a placement target: `{"pod": "ns/name", "nodeName": .., "gpuDevices": [..]}`."""
        try:
            req = orjson.loads(body or b"{}")
            pod, node, gpus = str(req.get("pod", "")), str(req["nodeName"]), [str(g) for g in req["gpuDevices"]]
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            return 400, orjson.dumps({"error": f'want {{"pod": "ns/name", "nodeName": .., "gpuDevices": [..]}}: {exc}'})
        return 200, _native.validate_target(self.source.inputs(), pod, node, gpus, self.source.config)

    def webhook(self, body: bytes) -> tuple[int, bytes]:
        pinner = self.pinner or Pinner(None)
        return 200, pinner.admit(body)

    def __rsgi_init__(self, loop: Any) -> None:
        pass

    def __rsgi_del__(self, loop: Any) -> None:
        pass

    async def __rsgi__(self, scope: Any, protocol: Any) -> None:
        if scope.proto != "http":
            return
        route = self.routes.get(scope.path)
        if route is None:
            protocol.response_bytes(404, JSON_HEADERS, b'{"error": "not found"}')
            return
        method, handler = route
        if scope.method != method:
            protocol.response_bytes(
                405, [("content-type", "text/plain"), ("allow", method)], b"405 method not allowed\n"
            )
            return
        chunks, size = [], 0
        async for chunk in protocol:
            size += len(chunk)
            if size > MAX_BODY:
                protocol.response_bytes(413, JSON_HEADERS, b'{"error": "request body too large"}')
                return
            chunks.append(chunk)
        try:
            status, answer = await asyncio.get_running_loop().run_in_executor(self.executor, handler, b"".join(chunks))
        except (ApiError, _native.EngineError, ValueError) as exc:
            status, answer = 502 if isinstance(exc, ApiError) else 400, orjson.dumps({"error": str(exc)})
        except Exception as exc:
            log.exception("handler failed", extra={"path": scope.path})
            status, answer = 500, orjson.dumps({"error": f"internal error: {exc}"})
        protocol.response_bytes(status, getattr(answer, "headers", JSON_HEADERS), answer)

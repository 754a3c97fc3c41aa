"""REST API on 8083 (RSGI app for Granian): cluster-info, placements, fragmentation, plan (dry run),
plus the pinning webhook on POST /webhook. Read-only apart from the webhook's placement claims."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from hami_fast.descheduler import kube as k
from hami_fast.descheduler.cache import ObjectStore
from hami_fast.descheduler.gpumap import GpuMap
from hami_fast.descheduler.placement import Placement
from hami_fast.descheduler.view import ClusterView
from hami_fast.descheduler.webhook import Pinner
from hami_fast.kube.client import KubeClient
from hami_fast.server.router import HttpError, Route, Router, json_body


class Source:
    """Where the API reads the cluster: the view the reflectors keep current and the placement
    informer's store (live), or a fixed snapshot (offline). Nothing here lists the cluster."""

    def __init__(
        self,
        client: KubeClient | None = None,
        snapshot: bytes | None = None,
        config: bytes | None = None,
        view: ClusterView | None = None,
        placement_store: ObjectStore | None = None,
    ) -> None:
        self.client, self.config = client, config
        if view is None:
            view = ClusterView.of_snapshot(snapshot or b'{"kind": "List", "items": []}', config)
        self.view, self.placement_store = view, placement_store

    def placements(self) -> list[Placement]:
        return [Placement(body) for body in self.placement_store.items()] if self.placement_store is not None else []

    def synced_view(self) -> ClusterView:
        """The view once its first LIST is in (a request right after start waits for it)."""
        if self.view.wait_synced(SYNC_WAIT_SECONDS):
            return self.view
        raise HttpError(503, "the descheduler has not read the cluster yet (nodes and pods still listing); retry")


SYNC_WAIT_SECONDS = 10.0


def cluster_info(source: Source, leading: bool) -> dict[str, Any]:
    view = source.synced_view()
    usage = view.usage()
    frag = orjson.loads(view.fragmentation())
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
        spec, status = p.spec, p.status
        items.append(
            {
                "namespace": p.namespace,
                "name": p.name,
                "reqID": spec.req_id,
                "podSelector": spec.pod_selector,
                "nodeName": spec.node_name,
                "gpuDevices": spec.gpu_devices,
                "resolvedUUIDs": status.resolved_uuids,
                "evictPod": spec.evict_pod or None,
                "phase": status.phase or "",
                "claimedBy": status.claimed_by,
                "assignmentDetails": status.assignment_details,
                "consumedAt": status.consumed_at,
                "message": status.message,
            }
        )
        for detail in status.assignment_details:
            allocations.append(
                {
                    "pod": f"{p.namespace}/{detail['podName']}",
                    "placement": p.key,
                    "node": spec.node_name,
                    "gpuDevice": detail["gpuDevice"],
                    "result": status.phase,
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
        return self.source.synced_view().fragmentation()

    def plan(self, body: bytes) -> bytes:
        json_body(body)
        return self.source.synced_view().plan_bytes(body.strip() or b"{}")

    def validate(self, body: bytes) -> bytes:
        """Dry-fit a placement target: `{"pod": "ns/name", "nodeName": .., "gpuDevices": [..]}`."""
        req = json_body(body)
        try:
            pod, node, gpus = str(req.get("pod", "")), str(req["nodeName"]), [str(g) for g in req["gpuDevices"]]
        except KeyError as exc:
            raise HttpError(400, f"request body: field {exc} is required; want {VALIDATE_SHAPE}") from None
        except (TypeError, AttributeError) as exc:
            raise HttpError(400, f"request body: want {VALIDATE_SHAPE}: {exc}") from None
        return self.source.synced_view().validate_target(pod, node, gpus)

    def webhook(self, body: bytes) -> bytes:
        return (self.pinner or Pinner(None)).admit(body)


def health_routes() -> list[Route]:
    return [Route("GET", "/healthz", lambda _: OK, "inline"), Route("GET", "/readyz", lambda _: OK, "inline")]


def webhook_app(pinner: Pinner | None, executor: ThreadPoolExecutor) -> Router:
    """The webhook's own listener: `/webhook` and the health checks, nothing of the API."""
    admit = (pinner or Pinner(None)).admit
    return Router([Route("POST", "/webhook", admit), *health_routes()], executor, name="descheduler-webhook")

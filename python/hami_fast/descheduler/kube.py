"""Kubernetes API calls of the descheduler: placements, snapshots, eviction. Its Lease is `kube/lease.py`."""

from __future__ import annotations

from typing import Any

import orjson

from hami_fast import annotations as keys
from hami_fast.kube import times
from hami_fast.kube.client import KubeClient, path_of
from hami_fast.kube.errors import NotFound, TooManyRequests

GROUP = "scheduling.hami.placement.com"
VERSION = "v1"
PLURAL = "hamipodplacements"
SCHEDULER_NAME = "hami-scheduler"
# Annotation keys by the names the controller and the webhook use (the keys live in hami_fast.annotations).
STAMP_NAME = keys.PLACEMENT_NAME
STAMP_REQ_ID = keys.PLACEMENT_REQ_ID
STAMP_TARGET = keys.PLACEMENT_TARGET
USE_UUID = keys.USE_GPU_UUID
ALLOCATED = keys.ALLOCATED


is_allocation_list = keys.is_allocation_list


now_rfc3339 = times.now  # status stamps (metav1.Time); kept for the controller and the webhook


def placements_path(namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
    parts = ["apis", GROUP, VERSION]
    if namespace:
        parts += ["namespaces", namespace]
    parts.append(PLURAL)
    if name:
        parts.append(name)
    if sub:
        parts.append(sub)
    return path_of(*parts)


def list_placements(client: KubeClient, namespace: str | None = None) -> list[dict[str, Any]]:
    return list_placements_at(client, namespace)[0]


def list_placements_at(client: KubeClient, namespace: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """A consistent LIST (no resourceVersion: served at the latest revision) and the list's resourceVersion."""
    body = client.request("GET", placements_path(namespace)).json()
    return body.get("items") or [], (body.get("metadata") or {}).get("resourceVersion") or ""


def get_placement(client: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return client.request("GET", placements_path(namespace, name)).json()
    except NotFound:
        return None


def put_status(client: KubeClient, placement: dict[str, Any]) -> dict[str, Any]:
    """PUT /status with the object's resourceVersion: 409 when someone else wrote first."""
    meta = placement["metadata"]
    body = orjson.dumps(placement)
    return client.request("PUT", placements_path(meta["namespace"], meta["name"], "status"), body=body).json()


def snapshot_inputs(client: KubeClient) -> list[bytes]:
    """Fresh LISTs of nodes and pods, as bytes for the engine."""
    nodes = client.request("GET", "/api/v1/nodes").data
    pods = client.request("GET", "/api/v1/pods").data
    return [nodes, pods]


def get_node(client: KubeClient, name: str) -> dict[str, Any] | None:
    try:
        return client.request("GET", path_of("api", "v1", "nodes", name)).json()
    except NotFound:
        return None


def get_pod(client: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return client.get_pod(namespace, name)
    except NotFound:
        return None


def list_pods(client: KubeClient, namespace: str) -> list[dict[str, Any]]:
    return client.request("GET", path_of("api", "v1", "namespaces", namespace, "pods")).json().get("items") or []


def evict(client: KubeClient, namespace: str, name: str, grace_seconds: int | None = None) -> int:
    """POST the policy/v1 Eviction; returns the HTTP status (200/201 accepted, 404 gone, 429 budget).

    Never deletes directly: a disruption budget that says no is waited on by the caller.
    """
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    if grace_seconds is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace_seconds}
    path = path_of("api", "v1", "namespaces", namespace, "pods", name, "eviction")
    try:
        return client.request("POST", path, body=orjson.dumps(body), ok=(200, 201)).status
    except (NotFound, TooManyRequests) as exc:
        return exc.status

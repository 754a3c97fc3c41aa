"""Kubernetes API calls of the descheduler: placements, snapshots, eviction, its own Lease."""

from __future__ import annotations

import logging
import socket
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from hami_fast.kube.client import ApiError, KubeClient, path_of

log = logging.getLogger("hami_fast.descheduler")

GROUP = "scheduling.hami.placement.com"
VERSION = "v1"
PLURAL = "hamipodplacements"
SCHEDULER_NAME = "hami-scheduler"
STAMP_NAME = "placement.hami.io/name"
STAMP_REQ_ID = "placement.hami.io/req-id"
STAMP_TARGET = "placement.hami.io/target"
USE_UUID = "nvidia.com/use-gpuuuid"
ALLOCATED = "hami.io/vgpu-devices-allocated"


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    return client.request("GET", placements_path(namespace)).json().get("items") or []


def get_placement(client: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return client.request("GET", placements_path(namespace, name)).json()
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


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


def get_pod(client: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return client.request("GET", path_of("api", "v1", "namespaces", namespace, "pods", name)).json()
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


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
    except ApiError as exc:
        if exc.status in (404, 429):
            return exc.status
        raise


class LeaseElector(threading.Thread):
    """Leader election on the descheduler's own coordination.k8s.io Lease (acquire, renew, expire)."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        stop: threading.Event,
        identity: str = "",
        duration: int = 15,
        period: float = 2.0,
    ) -> None:
        super().__init__(name="descheduler-lease", daemon=True)
        self.client, self.namespace, self.lease_name, self.stop_event = client, namespace, name, stop
        self.identity = identity or socket.gethostname()
        self.duration, self.period = duration, period
        self.leading = threading.Event()

    def path(self, named: bool = True) -> str:
        parts = ["apis", "coordination.k8s.io", "v1", "namespaces", self.namespace, "leases"]
        return path_of(*(parts + ([self.lease_name] if named else [])))

    def try_acquire(self) -> bool:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        try:
            lease = self.client.request("GET", self.path(), limited=False).json()
        except ApiError as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.lease_name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": self.duration,
                    "acquireTime": stamp,
                    "renewTime": stamp,
                },
            }
            try:
                self.client.request("POST", self.path(named=False), body=orjson.dumps(body), limited=False)
                return True
            except ApiError:
                return False
        spec = lease.setdefault("spec", {})
        holder = spec.get("holderIdentity") or ""
        renew = spec.get("renewTime") or spec.get("acquireTime")
        expired = True
        if renew:
            renewed = datetime.fromisoformat(str(renew).replace("Z", "+00:00"))
            expired = datetime.now(UTC) - renewed > timedelta(
                seconds=int(spec.get("leaseDurationSeconds") or self.duration)
            )
        if holder != self.identity and not expired:
            return False
        if holder != self.identity:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(holderIdentity=self.identity, renewTime=stamp, leaseDurationSeconds=self.duration)
        try:
            self.client.request("PUT", self.path(), body=orjson.dumps(lease), limited=False)
            return True
        except ApiError:
            return False

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                leading = self.try_acquire()
            except ApiError as exc:
                log.warning("lease: %s", exc)
                leading = False
            if leading != self.leading.is_set():
                log.info("descheduler leadership %s", "acquired" if leading else "lost")
                (self.leading.set if leading else self.leading.clear)()
            self.stop_event.wait(self.period)

"""The live cluster as the engine reads it: paged LISTs through the user's kubeconfig (official client)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from hami_fast._native import Cluster
from hami_fast.kube import errors as api
from hami_fast.kube.client import KubeClient, load_api_client

PAGE = 500
RESOURCES = {"nodes": "/api/v1/nodes", "pods": "/api/v1/pods", "resourcequotas": "/api/v1/resourcequotas"}


class NotFound(ValueError):
    """The named object does not exist."""


@dataclass
class Snapshot:
    """Raw LIST pages per resource (bytes, as the API sent them) and the engine's Cluster built from them."""

    pages: dict[str, list[bytes]] = field(default_factory=dict)
    cluster: Cluster = field(default_factory=Cluster)
    #: One line per object the engine skipped (a malformed annotation), as `explain` reports them.
    warnings: list[str] = field(default_factory=list)

    def inputs(self) -> list[bytes]:
        """Node and pod pages, as the planner and the fragmentation measure take them."""
        return [*self.pages.get("nodes", []), *self.pages.get("pods", [])]


def connect(kubeconfig: str = "") -> KubeClient:
    return KubeClient(load_api_client(kubeconfig), qps=50, burst=100)


def list_pages(client: KubeClient, path: str) -> list[bytes]:
    pages, token = [], ""
    while True:
        query: list[tuple[str, Any]] = [("limit", PAGE)] + ([("continue", token)] if token else [])
        page = client.request("GET", path, query=query).data
        pages.append(page)
        token = orjson.loads(page).get("metadata", {}).get("continue") or ""
        if not token:
            return pages


def snapshot(client: KubeClient, config: bytes | None = None) -> Snapshot:
    snap = Snapshot(cluster=Cluster(config))
    for resource, path in RESOURCES.items():
        try:
            snap.pages[resource] = list_pages(client, path)
        except (api.Forbidden, api.NotFound):
            if resource == "resourcequotas":
                continue  # quotas are optional: without read access, verdicts ignore them
            raise
        for page in snap.pages[resource]:
            _, _, _, errors = snap.cluster.apply_list_page(page)
            snap.warnings += [f"{resource}: skipped {error}" for error in errors]
    return snap


def device_config_map(client: KubeClient, reference: str, key: str = "device-config.yaml") -> bytes:
    """The device config file held in ConfigMap `namespace/name` (HAMi's `hami-scheduler-device`)."""
    namespace, _, name = reference.rpartition("/")
    if not namespace or not name:
        raise ValueError(
            f"--device-config-map {reference!r}: want NAMESPACE/NAME, e.g. kube-system/hami-scheduler-device"
        )
    try:
        data = client.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}").json().get("data") or {}
    except api.NotFound:
        raise NotFound(f'configmap "{name}" not found in namespace "{namespace}"') from None
    if key not in data:
        raise ValueError(f"configmap {reference}: no key {key} (keys: {', '.join(sorted(data)) or 'none'})")
    return str(data[key]).encode()


def get_pod(client: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    try:
        return client.get_pod(namespace, name)
    except api.NotFound:
        raise NotFound(f'pod "{name}" not found in namespace "{namespace}"') from None

"""HAMi's side of the node handshake, so HAMi's device plugin sees the same peer as with HAMi.

Every 15 s (HAMi's ticker), while leading, the engine runs one of HAMi's registration passes
(`Cluster.registration_pass`): it decides which nodes HAMi's cache would hold and returns the
writes HAMi's scheduler makes: `Requesting_<time>` into `hami.io/node-handshake` and each vendor
variant HAMi's default device config writes (`-dcu`, `-xpu`, `-va`, `-biren`) where the value
carries no request yet, and the deletion of `hami.io/node-handshake` when HAMi gives a node up.
The device plugin answers with `Reported_<time>`. One merge patch per node carries its writes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from hami_fast._native import Cluster
from hami_fast.kube.lease import Leadership

log = logging.getLogger("hami_fast.handshake")

PERIOD_SECONDS = 15.0
NodePatcher = Callable[[str, bytes], None]


def patches(writes: list[dict[str, Any]]) -> dict[str, bytes]:
    """One JSON merge patch per node from the pass's writes (`value: None` deletes the key)."""
    by_node: dict[str, dict[str, str | None]] = {}
    for w in writes:
        by_node.setdefault(w["node"], {})[w["key"]] = w["value"]
    return {node: orjson.dumps({"metadata": {"annotations": ann}}) for node, ann in by_node.items()}


def run_pass(cluster: Cluster, patch_node: NodePatcher, now: int) -> int:
    """One registration pass and its writes; returns how many nodes were patched."""
    done = 0
    for node, body in patches(orjson.loads(cluster.registration_pass(now))).items():
        try:
            patch_node(node, body)
            done += 1
        except Exception as exc:  # noqa: BLE001 - one node's failure must not stop the others (HAMi logs and goes on)
            log.warning("handshake write failed", extra={"node": node, "error": str(exc)})
    return done


class Handshaker(threading.Thread):
    """Runs a pass once the caches are synced, then every `period` seconds while leading."""

    def __init__(
        self,
        cluster: Cluster,
        patch_node: NodePatcher,
        leading: Leadership,
        synced: threading.Event,
        stop: threading.Event,
        period: float = PERIOD_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(name="handshake", daemon=True)
        self.cluster, self.patch_node = cluster, patch_node
        self.leading, self.synced, self.stop_event = leading, synced, stop
        self.period, self.clock = period, clock
        self.passes = 0

    def run(self) -> None:
        while not self.synced.wait(0.5):
            if self.stop_event.is_set():
                return
        while not self.stop_event.is_set():
            if self.leading.is_set():
                run_pass(self.cluster, self.patch_node, int(self.clock()))
                self.passes += 1
            self.stop_event.wait(self.period)


def kube_node_patcher(client: Any, written: Callable[[str, dict[str, Any]], object] | None = None) -> NodePatcher:
    """`written(node, metadata)` gets each answer's node metadata (NodeLocks keeps its resourceVersion)."""
    from hami_fast.kube.client import MERGE_PATCH, path_of

    def patch(node: str, body: bytes) -> None:
        answer = client.request("PATCH", path_of("api", "v1", "nodes", node), body=body, content_type=MERGE_PATCH)
        if written is not None:
            try:
                written(node, answer.json().get("metadata") or {})
            except (ValueError, AttributeError):
                pass

    return patch


def memory_node_patcher(cluster: Cluster, nodes: dict[str, dict[str, Any]], lock: Any) -> NodePatcher:
    """In-memory clusters have no device plugin: the node answers a request at once, as the plugin would."""

    def patch(node: str, body: bytes) -> None:
        with lock:
            obj = nodes.get(node)
            if obj is None:
                return
            ann = obj.setdefault("metadata", {}).setdefault("annotations", {})
            for key, value in orjson.loads(body)["metadata"]["annotations"].items():
                if value is None:
                    ann.pop(key, None)
                else:
                    ann[key] = value.replace("Requesting_", "Reported_", 1)
            cluster.apply(orjson.dumps(obj, default=str))

    return patch

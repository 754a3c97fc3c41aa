"""The descheduler's view of the cluster: nodes and pods in the engine (`_native.ObjectCache`), fed
by the same reflectors as the scheduler's engine (list once, then watch).

The controller's validations, the automatic mode, the REST API and the GPU map all read it; none
lists the cluster. Offline (`--snapshot`), the view is the snapshot file, read once.
"""

from __future__ import annotations

import threading
from typing import Any

import orjson

from hami_fast import _native
from hami_fast.kube.client import KubeClient
from hami_fast.kube.reflector import NODES, PODS, Reflector


class ClusterView:
    """Nodes and pods as the planner reads them. `objects` is the engine's cache (thread-safe)."""

    def __init__(self, config: bytes | None = None) -> None:
        self.config = config
        self.objects = _native.ObjectCache(config)
        self.reflectors: list[Reflector] = []

    @classmethod
    def of_snapshot(cls, snapshot: bytes, config: bytes | None = None) -> ClusterView:
        view = cls(config)
        view.objects.apply(snapshot, "snapshot")
        return view

    @classmethod
    def watching(
        cls, client: KubeClient, stop: threading.Event, config: bytes | None = None, watch_seconds: int = 300
    ) -> ClusterView:
        view = cls(config)
        view.reflectors = [
            Reflector(client, view.objects, resource, stop, watch_seconds=watch_seconds) for resource in (NODES, PODS)
        ]
        return view

    @property
    def live(self) -> bool:
        return bool(self.reflectors)

    def running(self) -> bool:
        return any(r.is_alive() for r in self.reflectors)

    def start(self) -> None:
        for r in self.reflectors:
            if not r.is_alive():
                r.start()

    def synced(self) -> bool:
        return all(r.stats.synced.is_set() for r in self.reflectors)

    def wait_synced(self, timeout: float) -> bool:
        return all(r.stats.synced.wait(timeout) for r in self.reflectors)

    def relist(self) -> None:
        """Refreshes once, synchronously (one-shot runs and tests without running reflectors)."""
        for r in self.reflectors:
            r.list()

    def refresh(self, *objects: bytes) -> None:
        """Objects just read from the API server (a pod and its target node before a move): newer
        than, or as new as, what the watch delivered, so a check does not wait for the watch."""
        for obj in objects:
            self.objects.apply(obj, "object")

    def generation(self) -> int:
        return self.objects.generation()

    # -- what the readers ask --------------------------------------------------------------------

    def plan(self, options: dict[str, Any] | bytes) -> dict[str, Any]:
        body = options if isinstance(options, bytes) else orjson.dumps(options)
        return orjson.loads(self.objects.plan(body))

    def plan_bytes(self, options: bytes) -> bytes:
        return self.objects.plan(options)

    def fragmentation(self) -> bytes:
        return self.objects.fragmentation()

    def validate_target(self, pod: str, node: str, gpus: list[str]) -> bytes:
        return self.objects.validate_target(pod, node, gpus)

    def evictee_refusal(self, pod: dict[str, Any], scheduler_name: str) -> str:
        """Why the engine would not evict `pod` for a placement ("is a bare pod ..."), or ''."""
        try:
            self.objects.check_evictee(orjson.dumps(pod), scheduler_name)
        except _native.EngineError as refused:
            return refused.message
        return ""

    def usage(self) -> list[dict[str, Any]]:
        return orjson.loads(self.objects.usage())

    def holds(self) -> list[dict[str, Any]]:
        return orjson.loads(self.objects.holds())

    def waiting_for_moves(self) -> list[tuple[str, str]]:
        """The pods (`namespace/name`, uid) moves could make room for, in queue order."""
        return self.objects.waiting_for_moves()

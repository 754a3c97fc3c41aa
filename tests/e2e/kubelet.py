"""A kubelet stand-in for the preemption suites (the control plane has no kubelet): a pod bound to a
node and allocated by the device plugin is reported Running and Ready (a PodDisruptionBudget
counts only Ready pods), and a terminating pod is removed once its grace period is over, as the
kubelet does after its containers stop."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

from controlplane import ApiError, KubeApi
from sidebyside import BIND_PHASE, Watch, log


def ready_status() -> dict[str, Any]:
    """A pod status patch: Running, its containers started and Ready."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [
        {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        for kind in ("Initialized", "ContainersReady", "Ready")
    ]
    running = {"running": {"startedAt": now}}
    containers = [
        {"name": "main", "ready": True, "restartCount": 0, "image": "cuda:e2e", "imageID": "", "state": running}
    ]
    return {"status": {"phase": "Running", "startTime": now, "conditions": conditions, "containerStatuses": containers}}


class Kubelet:
    """Watches the pods of `namespace` (every namespace when empty)."""

    def __init__(self, api: KubeApi, namespace: str = "") -> None:
        self.api = api
        self.started: set[str] = set()  # UIDs reported Ready
        self.removing: set[str] = set()  # UIDs whose removal is scheduled
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        self.watch = Watch(api, path, self._on_pod)
        self.watch.start()
        self.watch.synced.wait(30)

    def stop(self) -> None:
        self.watch.stop()

    def _on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if kind == "DELETED":
            return
        if meta.get("deletionTimestamp"):
            if meta["uid"] not in self.removing:
                self.removing.add(meta["uid"])
                grace = float(meta.get("deletionGracePeriodSeconds") or 0)
                threading.Thread(target=self._remove, args=(meta, grace), daemon=True).start()
            return
        allocated = (meta.get("annotations") or {}).get(BIND_PHASE) == "success"
        if pod["spec"].get("nodeName") and allocated and meta["uid"] not in self.started:
            self.started.add(meta["uid"])
            self._call("PATCH", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status", ready_status())

    def _remove(self, meta: dict[str, Any], grace: float) -> None:
        time.sleep(grace)
        options = {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
        self._call("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", options)

    def _call(self, method: str, path: str, body: dict[str, Any]) -> None:
        try:
            if method == "PATCH":
                self.api.patch(path, body, kind="strategic")
            else:
                self.api.request(method, path, body)
        except ApiError as exc:
            if exc.status not in (404, 409):
                log(f"kubelet stand-in: {method} {path}: {exc}")

"""Leadership as HAMi decides it: follow kube-scheduler's Lease; leader iff its holder starts with our hostname."""

from __future__ import annotations

import logging
import socket
import threading
from datetime import UTC, datetime
from typing import Any

from hami_fast.kube.client import ApiError, KubeClient, path_of

log = logging.getLogger("hami_fast.leader")


def is_holder(lease: dict[str, Any], identity: str, now: datetime | None = None) -> bool:
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    if not identity or not holder.startswith(identity):
        return False
    renew = spec.get("renewTime") or spec.get("acquireTime")
    duration = spec.get("leaseDurationSeconds") or 0
    if not renew:
        return False
    renewed = datetime.fromisoformat(str(renew).replace("Z", "+00:00"))
    now = now or datetime.now(UTC)
    return (now - renewed).total_seconds() < duration


class AlwaysLeader:
    def __init__(self) -> None:
        self.leading = threading.Event()
        self.leading.set()

    def start(self) -> None:
        pass


class LeaseFollower(threading.Thread):
    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        stop: threading.Event,
        identity: str = "",
        period: float = 2.0,
    ) -> None:
        super().__init__(name="lease-follower", daemon=True)
        self.client, self.namespace, self.lease_name, self.stop_event = client, namespace, name, stop
        self.identity = identity or socket.gethostname()
        self.period = period
        self.leading = threading.Event()

    def run(self) -> None:
        path = path_of("apis", "coordination.k8s.io", "v1", "namespaces", self.namespace, "leases", self.lease_name)
        while not self.stop_event.is_set():
            try:
                leading = is_holder(self.client.request("GET", path, limited=False).json(), self.identity)
            except (ApiError, ValueError) as exc:
                log.debug("lease not readable: %s", exc)
                leading = False
            if leading != self.leading.is_set():
                log.info(
                    "leadership %s",
                    "acquired" if leading else "lost",
                    extra={"lease": f"{self.namespace}/{self.lease_name}"},
                )
                (self.leading.set if leading else self.leading.clear)()
            self.stop_event.wait(self.period)

"""The node locks a Bind takes, as HAMi's `lockAllDevices` and `releaseAllDevices` handle them.

The engine names the locks of a pod in HAMi's order (`FilterDecision.locks`,
`Cluster.bind_locks`): HAMi's shared `hami.io/mutex.lock` for the backends that share it (NVIDIA,
Hygon, ...), a backend's own lock (Cambricon's `cambricon.com/dsmlu.lock`), none for a pod asking
only backends without one. They are taken in that order; when one is refused, those taken are
released in reverse. A failed Bind then releases as HAMi's does: the shared lock if this pod holds
it, and every backend's own lock whoever holds it.
"""

from __future__ import annotations

import logging

from hami_fast.kube.nodelock import LOCK_KEY, NodeLocker
from hami_fast.kube.stamplock import StampLocker

log = logging.getLogger("hami_fast.bindlocks")


class BindLocks:
    def __init__(self, shared: NodeLocker, stamps: dict[str, StampLocker]) -> None:
        self.shared, self.stamps = shared, stamps

    def take(self, node: str, namespace: str, name: str, keys: list[str]) -> None:
        """Every lock of `keys` in order; on a refusal (LockContention) or error, the ones taken are
        released in reverse and the Bind's failure release runs, then the error is raised."""
        taken: list[str] = []
        try:
            for key in keys:
                if key == LOCK_KEY:
                    self.shared.acquire(node, namespace, name)
                else:
                    self.stamps[key].acquire(node)
                taken.append(key)
        except Exception:
            for key in reversed(taken):
                self._release(key, node, namespace, name)
            # The shared lock is this pod's only if taken just now (released above): HAMi's owner
            # check would find it another pod's, so it is not read again.
            self._release_stamps(node)
            raise

    def release_after_failure(self, node: str, namespace: str, name: str, keys: list[str]) -> None:
        """HAMi's `releaseAllDevices` after the locks were taken: the shared lock when this pod
        takes it, and every backend's own lock, whoever holds it."""
        if LOCK_KEY in keys:
            self._release(LOCK_KEY, node, namespace, name)
        self._release_stamps(node)

    def _release_stamps(self, node: str) -> None:
        for key in self.stamps:
            self._release(key, node, "", "")

    def _release(self, key: str, node: str, namespace: str, name: str) -> None:
        try:
            if key == LOCK_KEY:
                self.shared.release(node, namespace, name)
            else:
                self.stamps[key].release(node)
        except Exception as exc:
            log.warning("node lock release failed", extra={"node": node, "lock": key, "error": str(exc)})

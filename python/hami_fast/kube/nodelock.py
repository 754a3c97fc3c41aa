"""HAMi's node lock `hami.io/mutex.lock` (`<RFC3339>,<ns>,<name>`): acquire, expire, dangling-owner release.

Byte-compatible with HAMi's scheduler and device plugin: the plugin finds the pod being allocated through it.
Beyond HAMi, two more locks are dangling, as nothing will use or release them before HAMi's expiry:
one whose owner is bound to another node (its bind here never finished: the replica that held it
died between lock and binding, and a binding cannot change), and one whose owner the device plugin
has already answered on this node (`bind-phase` `success` or `failed`: the plugin writes it, then
releases the lock, and that release was lost, e.g. to an API server restart). Checked only for
locks older than a normal bind, with a live read of the owner.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Protocol

from hami_fast import annotations as keys
from hami_fast._native import EngineError, format_node_lock, parse_node_lock
from hami_fast.kube import times
from hami_fast.kube.errors import Conflict, NotFound

LOCK_KEY = keys.NODE_LOCK
# A lock older than this whose owner is bound elsewhere is released (no bind takes this long).
OWNER_RECHECK_AGE = 30.0
# The bind-phase values HAMi's device plugin writes when its Allocate is over, just before it releases the lock.
DEVICE_PLUGIN_ANSWERS = ("success", "failed")


class LockContention(Exception):
    pass


class NodeStore(Protocol):
    """What the lock needs from the API: read a node's lock and resourceVersion, patch it, see if a pod exists."""

    def read_lock(self, node: str) -> tuple[str | None, str]: ...
    def write_lock(self, node: str, value: str | None, resource_version: str) -> None:
        """Raises errors.Conflict when the node changed since `resource_version` (retried)."""

    def pod_exists(self, namespace: str, name: str) -> bool: ...
    def get_pod(self, namespace: str, name: str, cached: bool = False) -> dict[str, Any]: ...


def _duration_text(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


class NodeLocker:
    def __init__(self, store: NodeStore, timeout: float = 300.0) -> None:
        self.store, self.timeout = store, timeout
        self._mutexes: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _mutex(self, node: str) -> threading.Lock:
        with self._guard:
            return self._mutexes.setdefault(node, threading.Lock())

    def forget(self, node: str) -> None:
        with self._guard:
            self._mutexes.pop(node, None)

    def acquire(self, node: str, namespace: str, name: str) -> None:
        """One try, as HAMi's LockNode: LockContention while another live pod holds an unexpired lock.
        Waiting for the holder is the bind queue's job (server/bindqueue.py)."""
        value, version = self.store.read_lock(node)
        if value:
            try:
                lock = parse_node_lock(value)
            except EngineError:
                lock = ("", "", "")
            timestamp, owner_ns, owner_name = lock
            age = times.age_seconds(timestamp)
            if age is None or age > self.timeout:
                self.release(node, namespace, name, check_owner=False)
            elif (owner_ns, owner_name) == (namespace, name):
                return
            elif owner_name and not self.store.pod_exists(owner_ns, owner_name):
                self.release(node, namespace, name, check_owner=False)
            elif owner_name and age > OWNER_RECHECK_AGE and self._owner_done(owner_ns, owner_name, node):
                self.release(node, namespace, name, check_owner=False)
            else:
                raise LockContention(
                    f"node {node} has been locked within {_duration_text(self.timeout)}: node lock contention"
                )
            known = None  # released above: the node has changed since the read
        else:
            known = (value, version)
        self._set(node, namespace, name, known)

    def _owner_done(self, namespace: str, name: str, node: str) -> bool:
        """The owner, read from the API server (not a cache: a pod recreated under the same name is
        a new owner), is gone, bound to another node, or allocated on this one by the device plugin."""
        try:
            pod = self.store.get_pod(namespace, name)
        except NotFound:
            return True
        bound_to = (pod.get("spec") or {}).get("nodeName") or ""
        if bound_to == node:
            phase = ((pod.get("metadata") or {}).get("annotations") or {}).get(keys.BIND_PHASE)
            return phase in DEVICE_PLUGIN_ANSWERS
        return bound_to != ""

    def _set(self, node: str, namespace: str, name: str, known: tuple[str | None, str] | None = None) -> None:
        """Write the lock, guarded by the node's resourceVersion; `known` is a read just made (saves a GET)."""
        suffix = f",{namespace},{name}"
        with self._mutex(node):
            for attempt in range(5):
                value, version = known or self.store.read_lock(node)
                known = None
                if value and value.endswith(suffix):
                    return
                if value:
                    raise LockContention(
                        f"node {node} has been locked within {_duration_text(self.timeout)}: node lock contention"
                    )
                try:
                    self.store.write_lock(node, format_node_lock(times.now_local(), namespace, name), version)
                    return
                except Conflict:
                    time.sleep(0.1 * 2**attempt * (1 + random.random() * 0.5))
            raise LockContention(f"node {node}: lock update kept conflicting")

    def release(self, node: str, namespace: str, name: str, check_owner: bool = True) -> None:
        with self._mutex(node):
            for attempt in range(5):
                value, version = self.store.read_lock(node)
                if not value:
                    return
                if check_owner and not value.endswith(f",{namespace},{name}"):
                    return
                try:
                    self.store.write_lock(node, None, version)
                    return
                except Conflict:
                    time.sleep(0.1 * 2**attempt * (1 + random.random() * 0.5))

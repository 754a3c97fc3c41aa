"""A backend's own node lock: an annotation holding the RFC 3339 time it was taken (Cambricon's
`cambricon.com/dsmlu.lock`), as HAMi's Cambricon backend keeps it.

Taken when absent (a merge patch, no resourceVersion, as HAMi writes it); refused while younger
than its expiry; an expired one is released and taken again; a value that is no time fails the Bind.
Anyone releases it: HAMi deletes it on every failed Bind, whoever took it (the device plugin deletes
it after a successful one).
"""

from __future__ import annotations

from typing import Protocol

from hami_fast.kube import times
from hami_fast.kube.nodelock import LockContention


class UnreadableLock(Exception):
    """The lock annotation holds no RFC 3339 time (HAMi's Bind fails on it too, then deletes it)."""


class AnnotationStore(Protocol):
    def read_annotation(self, node: str, key: str) -> str | None:
        """From the node watch when it has the node, else from the API server."""

    def write_annotation(self, node: str, key: str, value: str | None) -> None:
        """A merge patch of one annotation (None deletes it), whatever the node's resourceVersion."""


class StampLocker:
    def __init__(self, store: AnnotationStore, key: str, expiry: float) -> None:
        self.store, self.key, self.expiry = store, key, expiry

    def acquire(self, node: str) -> None:
        value = self.store.read_annotation(node, self.key)
        if value is not None:
            age = times.age_seconds(value)
            if age is None:
                raise UnreadableLock(f"node {node}: annotation {self.key} {value!r} is not an RFC 3339 time")
            if age <= self.expiry:
                raise LockContention(f"node {node} has been locked within {int(self.expiry // 60)} minutes")
            self.release(node)
        self.store.write_annotation(node, self.key, times.now_local())

    def release(self, node: str) -> None:
        if self.store.read_annotation(node, self.key) is not None:
            self.store.write_annotation(node, self.key, None)

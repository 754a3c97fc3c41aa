"""In-memory caches of the descheduler, fed by `kube.reflector.Reflector` (list once, then watch).

`ObjectStore` has the three methods a reflector feeds (as `_native.Cluster` does for the scheduler),
keeps objects by `namespace/name` as dicts (optionally trimmed to the fields the descheduler reads),
keeps one secondary index, and tells listeners about every change, including objects that vanished
while the watch was down (found by the re-list).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from hami_fast import annotations as keys
from hami_fast.descheduler import kube as k
from hami_fast.descheduler.placement import Placement
from hami_fast.kube.client import KubeClient
from hami_fast.kube.reflector import Reflector, Resource

Object = dict[str, Any]
Listener = Callable[[str, Object | None, Object | None], None]  # key, old, new (None: absent)


def key_of(obj: Object) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        return ""
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else name


def _version(obj: Object | None) -> str:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion") or ""


def _older(candidate: Object, current: Object | None) -> bool:
    """True when `candidate` is known to be older than what is stored. Resource versions are
    opaque, but kube-apiserver's (etcd revisions) are integers: compare those, trust the rest."""
    a, b = _version(candidate), _version(current)
    return a.isdigit() and b.isdigit() and int(a) < int(b)


class ObjectStore:
    def __init__(
        self,
        kind: str,
        trim: Callable[[Object], Object] | None = None,
        index: Callable[[Object], str] | None = None,
    ) -> None:
        self.kind = kind
        self.trim = trim or (lambda obj: obj)
        self.index_of = index
        self._objects: dict[str, Object] = {}
        self._index: dict[str, set[str]] = {}
        self._changed = threading.Condition()
        self.listeners: list[Listener] = []

    # -- reads (copies: callers may change what they get) ----------------------------------------

    def get(self, key: str) -> Object | None:
        with self._changed:
            obj = self._objects.get(key)
        return copy.deepcopy(obj) if obj is not None else None

    def items(self) -> list[Object]:
        with self._changed:
            objects = list(self._objects.values())
        return copy.deepcopy(objects)

    def select(self, predicate: Callable[[Object], bool]) -> list[Object]:
        """Copies of the objects `predicate` accepts (it sees the stored object: it must not change it)."""
        with self._changed:
            objects = [obj for obj in self._objects.values() if predicate(obj)]
        return copy.deepcopy(objects)

    def keys(self) -> list[str]:
        with self._changed:
            return list(self._objects)

    def indexed_keys(self, value: str) -> list[str]:
        with self._changed:
            return sorted(self._index.get(value, ()))

    def indexed(self, value: str) -> list[Object]:
        with self._changed:
            objects = [self._objects[key] for key in sorted(self._index.get(value, ()))]
        return copy.deepcopy(objects)

    def __len__(self) -> int:
        return len(self._objects)

    def wait_until(self, predicate: Callable[[ObjectStore], bool], timeout: float) -> bool:
        """Block until `predicate(self)` holds after some change (tests, and callers that wrote)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    # -- writes ----------------------------------------------------------------------------------

    def put(self, obj: Object) -> None:
        """Store what a write returned, so the next read does not wait for the watch to echo it
        (unless the watch already brought something newer)."""
        key = key_of(obj)
        if key:
            self._apply([(key, self.trim(obj))], keep_newer=True)

    def _apply(self, changes: Iterable[tuple[str, Object | None]], keep_newer: bool = False) -> None:
        heard: list[tuple[str, Object | None, Object | None]] = []
        with self._changed:
            for key, obj in changes:
                old = self._objects.get(key)
                if obj is None:
                    if old is None:
                        continue
                    del self._objects[key]
                elif old is not None and _version(old) == _version(obj) and _version(obj):
                    continue
                elif keep_newer and _older(obj, old):
                    continue
                else:
                    self._objects[key] = obj
                self._reindex(key, old, obj)
                heard.append((key, old, obj))
            if heard:
                self._changed.notify_all()
        for key, old, obj in heard:
            for listener in self.listeners:
                listener(key, old, obj)

    def _reindex(self, key: str, old: Object | None, new: Object | None) -> None:
        if self.index_of is None:
            return
        if old is not None:
            self._index.get(self.index_of(old), set()).discard(key)
        if new is not None:
            value = self.index_of(new)
            if value:
                self._index.setdefault(value, set()).add(key)

    # -- the reflector's side (same contract as `_native.Cluster`) ---------------------------------

    def apply_list_page(self, page: bytes) -> tuple[str, str, list[str], list[str]]:
        body = orjson.loads(page)
        meta = body.get("metadata") or {}
        keys, errors, changes = [], [], []
        for item in body.get("items") or []:
            key = key_of(item) if isinstance(item, dict) else ""
            if not key:
                errors.append(f"{self.kind} without metadata.name in the list")
                continue
            keys.append(key)
            changes.append((key, self.trim(item)))
        self._apply(changes)
        return meta.get("resourceVersion") or "", meta.get("continue") or "", keys, errors

    def apply_watch_event(self, line: bytes) -> tuple[str, str, str, int, str | None]:
        event = orjson.loads(line)
        event_type = str(event.get("type") or "")
        obj = event.get("object") or {}
        if event_type == "ERROR":
            return event_type, "", "", int(obj.get("code") or 0), None
        version = _version(obj)
        if event_type == "BOOKMARK":
            return event_type, version, "", 0, None
        key = key_of(obj)
        if not key:
            return event_type, version, "", 0, f"{self.kind} event without metadata.name"
        self._apply([(key, None if event_type == "DELETED" else self.trim(obj))])
        return event_type, version, key, 0, None

    def retain(self, kind: str, keys: list[str]) -> int:
        keep = set(keys)
        with self._changed:
            gone = [key for key in self._objects if key not in keep]
        self._apply((key, None) for key in gone)
        return len(gone)


class Informer:
    """A store and the reflector that keeps it current. `start()` watches in the background;
    `relist()` refreshes the store once, synchronously (one-shot runs and tests)."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        store: ObjectStore,
        stop: threading.Event,
        watch_seconds: int = 300,
    ) -> None:
        self.store, self.stop = store, stop
        self.reflector = Reflector(client, store, resource, stop, watch_seconds=watch_seconds)
        self.started = False

    def start(self) -> None:
        if not self.started:
            self.started = True
            self.reflector.start()

    def relist(self) -> None:
        self.reflector.list()

    def synced(self) -> bool:
        return self.reflector.stats.synced.is_set()

    def wait_synced(self, timeout: float) -> bool:
        return self.reflector.stats.synced.wait(timeout)


# The reservation keys feed the holds gauge (metrics.py).
KEPT_POD_ANNOTATIONS = (
    k.STAMP_NAME,
    k.ALLOCATED,
    keys.BIND_PHASE,
    keys.VGPU_NODE,
    keys.RESERVATION,
    keys.RESERVATION_EXPIRES,
)


def trim_pod(pod: Object) -> Object:
    """Only what the controller reads: a cluster's pods are many, a placement names few of them."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    annotations = meta.get("annotations") or {}
    kept_meta = {
        key: meta[key]
        for key in (
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "labels",
            "ownerReferences",
            "creationTimestamp",
            "deletionTimestamp",
        )
        if key in meta
    }
    kept_meta["annotations"] = {
        key: value for key, value in annotations.items() if key in KEPT_POD_ANNOTATIONS or k.is_allocation_list(key)
    }
    return {
        "metadata": kept_meta,
        "spec": {key: spec[key] for key in ("nodeName", "schedulerName") if key in spec},
        "status": {"phase": (pod.get("status") or {}).get("phase", "")},
    }


def pinned_by(pod: Object) -> str:
    """The placement (`namespace/name`) whose webhook pin this pod carries, or ''."""
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(k.STAMP_NAME, "")


def evictee_of(placement: Object) -> str:
    """The pod (`namespace/name`) a placement evicts, or ''."""
    return Placement(placement).evictee


def placement_informer(client: KubeClient, stop: threading.Event, watch_seconds: int = 300) -> Informer:
    resource = Resource("HamiPodPlacement", k.placements_path())
    return Informer(client, resource, ObjectStore("HamiPodPlacement", index=evictee_of), stop, watch_seconds)


def pod_informer(client: KubeClient, stop: threading.Event, scheduler_name: str, watch_seconds: int = 300) -> Informer:
    """Pods of `scheduler_name` only: every evictee and every pinned pod uses it (both are checked)."""
    resource = Resource("Pod", "/api/v1/pods", field_selector=f"spec.schedulerName={scheduler_name}")
    return Informer(client, resource, ObjectStore("Pod", trim=trim_pod, index=pinned_by), stop, watch_seconds)

"""Side effects of scheduling: pod patches, the node lock, bindings. One implementation per cluster source."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from hami_fast import annotations as keys
from hami_fast._native import Cluster
from hami_fast.kube.client import MERGE_PATCH, KubeClient, path_of, pod_path
from hami_fast.kube.errors import Conflict, NotFound
from hami_fast.kube.nodelock import LOCK_KEY
from hami_fast.kube.retry import retried


class Writer(Protocol):
    def patch_pod(self, namespace: str, name: str, patch: bytes) -> None: ...
    def get_pod(self, namespace: str, name: str, cached: bool = False) -> dict[str, Any]: ...
    def bind(self, namespace: str, name: str, uid: str, node: str, metadata: dict[str, Any] | None = None) -> None: ...
    def read_lock(self, node: str) -> tuple[str | None, str]: ...
    def write_lock(self, node: str, value: str | None, resource_version: str) -> None: ...
    def pod_exists(self, namespace: str, name: str) -> bool: ...
    def read_annotation(self, node: str, key: str) -> str | None: ...
    def write_annotation(self, node: str, key: str, value: str | None) -> None: ...


def binding_body(namespace: str, name: str, uid: str, node: str, metadata: dict[str, Any] | None = None) -> bytes:
    """The Binding; `metadata`'s annotations and labels are copied onto the pod as it is bound."""
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {**(metadata or {}), "name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
    )


def lock_patch(value: str | None, resource_version: str) -> bytes:
    return orjson.dumps({"metadata": {"annotations": {LOCK_KEY: value}, "resourceVersion": resource_version}})


def _older(version: str, than: str) -> bool:
    """resourceVersions are opaque, but etcd's are increasing integers: compare those, trust the rest."""
    return version.isdigit() and than.isdigit() and int(version) < int(than)


class NodeLocks:
    """Each node's lock annotation and resourceVersion as the node watch last delivered them.

    Fed by the node reflector's list pages (NodeLockFeed) and watch events, and by our own lock
    writes' answers. The lock's first read comes from here instead of a GET: the lock write carries
    the resourceVersion read, so a stale entry only makes that write fail with 409 Conflict, and the
    node's entry is then dropped so the retry reads the node from the API server (NodeLocker's
    loop). A node neither listed nor watched yet is read from the API server too.
    """

    def __init__(self, stamp_keys: tuple[str, ...] = ()) -> None:
        self._nodes: dict[str, tuple[str | None, str]] = {}
        self._guard = threading.Lock()
        # The backends' own locks (kube/stamplock.py): read from here as HAMi reads them from its
        # node lister, never taken once like the shared lock's entry.
        self.stamp_keys = stamp_keys
        self._stamps: dict[str, dict[str, str]] = {}

    def observe(self, node: str, meta: dict[str, Any]) -> bool:
        """A node object's metadata (a watch event or a write's response); an older version than
        the one held (a watch event arriving after our own write's answer) is ignored. True when it
        shows one of the backends' own locks released."""
        annotations = meta.get("annotations") or {}
        value = annotations.get(LOCK_KEY)
        version = str(meta.get("resourceVersion", ""))
        stamps = {k: annotations[k] for k in self.stamp_keys if k in annotations} if self.stamp_keys else {}
        with self._guard:
            held = self._nodes.get(node)
            if held is None or not _older(version, held[1]):
                self._nodes[node] = (value, version)
            if not self.stamp_keys:
                return False
            before = self._stamps.get(node, {})
            self._stamps[node] = stamps
            return any(k not in stamps for k in before)

    def stamp(self, node: str, key: str) -> tuple[bool, str | None]:
        """(whether the watch has shown the node, the lock's value there)."""
        with self._guard:
            stamps = self._stamps.get(node)
            return (stamps is not None, None if stamps is None else stamps.get(key))

    def observe_page(self, page: bytes) -> None:
        """Every node of a LIST page (the reflector's first list and re-lists), so even the first
        lock on a node after a start reads no node."""
        try:
            items = orjson.loads(page).get("items") or []
        except (orjson.JSONDecodeError, AttributeError):
            return
        for item in items:
            meta = (item or {}).get("metadata") or {}
            if meta.get("name"):
                self.observe(str(meta["name"]), meta)

    def retain(self, nodes: list[str]) -> None:
        """After a complete list: forget the nodes it did not contain (deleted during a watch gap)."""
        keep = set(nodes)
        with self._guard:
            for node in [n for n in self._nodes if n not in keep]:
                del self._nodes[node]
            for node in [n for n in self._stamps if n not in keep]:
                del self._stamps[node]

    def forget(self, node: str) -> None:
        """The shared lock's entry only (a 409 showed it stale): the next read GETs the node."""
        with self._guard:
            self._nodes.pop(node, None)

    def drop(self, node: str) -> None:
        """A deleted node: everything known of it."""
        with self._guard:
            self._nodes.pop(node, None)
            self._stamps.pop(node, None)

    def take(self, node: str) -> tuple[str | None, str] | None:
        """The watched value, once: the next read of this node goes to the API server unless the
        watch (or a write) refreshes it first."""
        with self._guard:
            return self._nodes.pop(node, None)


class NodeLockFeed:
    """The node reflector's store: the engine, plus each listed node's lock and resourceVersion into
    NodeLocks (watch events reach NodeLocks through the reflector's `on_event`)."""

    def __init__(self, cluster: Cluster, node_locks: NodeLocks) -> None:
        self.cluster, self.node_locks = cluster, node_locks

    def apply_list_page(self, page: bytes) -> tuple[str, str, list[str], list[str]]:
        info = self.cluster.apply_list_page(page)
        self.node_locks.observe_page(page)
        return info

    def apply_watch_event(self, line: bytes) -> tuple[str, str, str, int, str | None]:
        return self.cluster.apply_watch_event(line)

    def retain(self, kind: str, keys: list[str]) -> int:
        self.node_locks.retain(keys)
        return self.cluster.retain(kind, keys)


class PodKeys:
    """The pod reflector's store: the engine, plus the key (`namespace/name`) of every pod its list
    and watch show, from the keys the engine returns (no second parse). The node lock's
    dangling-owner check GETs only a pod this process has not seen: a pod seen alive holds its lock
    (a deletion the watch has not shown yet only delays the take-over to the queue's next recheck)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.keys: set[str] = set()

    def apply_list_page(self, page: bytes) -> tuple[str, str, list[str], list[str]]:
        info = self.cluster.apply_list_page(page)
        self.keys.update(info[2])
        return info

    def apply_watch_event(self, line: bytes) -> tuple[str, str, str, int, str | None]:
        info = self.cluster.apply_watch_event(line)
        event_type, _, key, _, _ = info
        if key and event_type == "DELETED":
            self.keys.discard(key)
        elif key and event_type in ("ADDED", "MODIFIED"):
            self.keys.add(key)
        return info

    def retain(self, kind: str, keys: list[str]) -> int:
        self.keys = set(keys)
        return self.cluster.retain(kind, keys)


class KubeWriter:
    """Against a real API server through the shared, rate-limited client."""

    blocking = True

    def __init__(
        self,
        client: KubeClient,
        node_locks: NodeLocks | None = None,
        pods: PodKeys | None = None,
        guard: Callable[[], None] | None = None,
    ) -> None:
        """`guard` checks each pod patch, binding and lock write just before it is sent (leadership)."""
        self.client = client
        self.node_locks = node_locks
        self.pods = pods
        self.guard = guard

    def patch_pod(self, namespace: str, name: str, patch: bytes) -> None:
        """A merge patch: the same patch twice leaves the same pod, so any unanswered try is retried."""
        path = pod_path(namespace, name)
        retried(
            lambda: self.client.request("PATCH", path, body=patch, content_type=MERGE_PATCH, guard=self.guard),
            f"patch pod {namespace}/{name}",
        )

    def get_pod(self, namespace: str, name: str, cached: bool = False) -> dict[str, Any]:
        """`cached`: served from the API server's watch cache (resourceVersion=0), cheaper and possibly stale."""
        try:
            return self.client.get_pod(namespace, name, cached=cached)
        except NotFound as exc:  # the Bind error kube-scheduler reports names the pod as HAMi's does
            raise NotFound(f"pod {namespace}/{name} not found") from exc

    def pod_exists(self, namespace: str, name: str) -> bool:
        """HAMi GETs the lock owner; a pod the pod watch shows alive needs no GET."""
        if self.pods is not None and f"{namespace}/{name}" in self.pods.keys:
            return True
        try:
            self.get_pod(namespace, name)
            return True
        except NotFound:
            return False

    def _node(self, node: str) -> dict[str, Any]:
        try:
            return self.client.request("GET", path_of("api", "v1", "nodes", node)).json()
        except NotFound as exc:
            raise NotFound(f"failed to get node {node}") from exc

    def read_lock(self, node: str) -> tuple[str | None, str]:
        """From the node watch when it has the node (saves a GET; the lock write's resourceVersion
        catches a stale value), else from the API server."""
        if self.node_locks is not None and (known := self.node_locks.take(node)) is not None:
            return known
        meta = self._node(node).get("metadata", {})
        return (meta.get("annotations") or {}).get(LOCK_KEY), meta.get("resourceVersion", "")

    def write_lock(self, node: str, value: str | None, resource_version: str) -> None:
        """Raises errors.Conflict (409) when the node changed since `resource_version` was read; the
        node's watched value is then dropped, so the retry reads the node from the API server."""
        path, body = path_of("api", "v1", "nodes", node), lock_patch(value, resource_version)
        try:
            # A retried write whose first answer was lost meets 409 (the node changed): the caller
            # reads the node again and finds its own lock.
            answer = retried(
                lambda: self.client.request("PATCH", path, body=body, content_type=MERGE_PATCH, guard=self.guard),
                f"write node {node}'s lock",
            )
        except Conflict:
            if self.node_locks is not None:
                self.node_locks.forget(node)
            raise
        if self.node_locks is not None:
            try:
                self.node_locks.observe(node, answer.json().get("metadata") or {})
            except (ValueError, AttributeError):
                self.node_locks.forget(node)

    def read_annotation(self, node: str, key: str) -> str | None:
        """A backend's own lock, from the node watch when it has shown the node (HAMi reads its
        node lister), else from the API server."""
        if self.node_locks is not None:
            seen, value = self.node_locks.stamp(node, key)
            if seen:
                return value
        return (self._node(node).get("metadata", {}).get("annotations") or {}).get(key)

    def write_annotation(self, node: str, key: str, value: str | None) -> None:
        patch = orjson.dumps({"metadata": {"annotations": {key: value}}})
        answer = self.client.request("PATCH", path_of("api", "v1", "nodes", node), body=patch, content_type=MERGE_PATCH)
        if self.node_locks is not None:
            try:
                self.node_locks.observe(node, answer.json().get("metadata") or {})
            except (ValueError, AttributeError):
                self.node_locks.forget(node)

    def bind(self, namespace: str, name: str, uid: str, node: str, metadata: dict[str, Any] | None = None) -> None:
        """POST the binding, retried as `patch_pod` is. A try whose answer was lost may have bound the
        pod: the retry's 409 then means done if the pod is on `node` (else it is the error)."""
        body = binding_body(namespace, name, uid, node, metadata)
        tried = [0]

        def post() -> None:
            tried[0] += 1
            try:
                self.client.request("POST", pod_path(namespace, name, "binding"), body=body, guard=self.guard)
            except Conflict:
                if tried[0] == 1 or self.get_pod(namespace, name).get("spec", {}).get("nodeName") != node:
                    raise

        retried(post, f"bind pod {namespace}/{name} to {node}")


class AlreadyBound(Exception):
    """The pod is bound already (a binding whose answer was lost): its allocation stays as written."""


def patch_unbound_pod(
    writer: Writer, namespace: str, name: str, metadata: dict[str, Any], resource_version: str
) -> None:
    """The allocation's annotations on a pod that is still unbound. A binding whose answer was lost
    may have bound the pod, with the annotations written before it; a later attempt (kube-scheduler
    filtered the pod again before it saw the binding) must not replace them with another node's
    devices. The patch carries `resource_version` as a precondition; on a conflict the pod is read
    again and patched with its new version while it is unbound, else AlreadyBound."""
    version = resource_version
    for _ in range(3):
        body = {**metadata, "resourceVersion": version} if version else metadata
        try:
            writer.patch_pod(namespace, name, orjson.dumps({"metadata": body}))
            return
        except Conflict:
            pod = writer.get_pod(namespace, name)
            bound_to = (pod.get("spec") or {}).get("nodeName")
            if bound_to:
                raise AlreadyBound(
                    f"pod {namespace}/{name} is bound to node {bound_to} already: its allocation is left as written"
                ) from None
            version = (pod.get("metadata") or {}).get("resourceVersion") or ""
    raise Conflict(f"pod {namespace}/{name} kept changing: its allocation was not written", reason="Conflict")


def merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch; `patch` must be freshly decoded (its values are taken, not copied)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = value
    return target


class MemoryWriter:
    """For `--snapshot` and the demo cluster: the same effects applied to objects held in memory.

    There is no device plugin here, so a successful bind also plays its part: `bind-phase: success`
    and the node lock released. Usage is the engine's reservation, made by Filter; nothing here
    re-applies pods to the engine.
    """

    blocking = False

    def __init__(self, cluster: Cluster, objects: list[dict[str, Any]]) -> None:
        self.cluster = cluster
        self.lock = threading.RLock()
        self.nodes = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "Node"}
        self.pods = {
            f"{o['metadata'].get('namespace', 'default')}/{o['metadata']['name']}": o
            for o in objects
            if o.get("kind") == "Pod"
        }
        self.versions: dict[str, int] = {}
        self.stamp_keys: tuple[str, ...] = ()  # the backends' own locks, dropped by a bind as their plugins do

    def remember_pod(self, namespace: str, name: str, uid: str) -> None:
        """A pod first seen by Filter (nobody created it here): keep its identity to patch and bind it."""
        key = f"{namespace}/{name}"
        if key in self.pods:  # every Filter after the first: no lock, no object built
            return
        with self.lock:
            self.pods.setdefault(
                key, {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": namespace, "uid": uid}}
            )

    def _pod(self, namespace: str, name: str) -> dict[str, Any]:
        pod = self.pods.get(f"{namespace}/{name}")
        if pod is None:
            raise NotFound(f"pod {namespace}/{name} not found")
        return pod

    def patch_pod(self, namespace: str, name: str, patch: bytes) -> None:
        with self.lock:
            merge(self._pod(namespace, name), orjson.loads(patch))

    def get_pod(self, namespace: str, name: str, cached: bool = False) -> dict[str, Any]:
        with self.lock:
            return copy.deepcopy(self._pod(namespace, name))

    def pod_exists(self, namespace: str, name: str) -> bool:
        return f"{namespace}/{name}" in self.pods

    def read_lock(self, node: str) -> tuple[str | None, str]:
        with self.lock:
            if node not in self.nodes:
                raise NotFound(f"failed to get node {node}")
            annotations = self.nodes[node]["metadata"].get("annotations") or {}
            return annotations.get(LOCK_KEY), str(self.versions.get(node, 0))

    def write_lock(self, node: str, value: str | None, resource_version: str) -> None:
        with self.lock:
            if resource_version != str(self.versions.get(node, 0)):
                raise Conflict(f"node {node} changed")
            merge(self.nodes[node], orjson.loads(lock_patch(value, resource_version)))
            self.nodes[node]["metadata"].pop("resourceVersion", None)
            self.versions[node] = self.versions.get(node, 0) + 1

    def read_annotation(self, node: str, key: str) -> str | None:
        with self.lock:
            if node not in self.nodes:
                raise NotFound(f"failed to get node {node}")
            return (self.nodes[node]["metadata"].get("annotations") or {}).get(key)

    def write_annotation(self, node: str, key: str, value: str | None) -> None:
        with self.lock:
            merge(self.nodes[node], {"metadata": {"annotations": {key: value}}})
            self.versions[node] = self.versions.get(node, 0) + 1

    def bind(self, namespace: str, name: str, uid: str, node: str, metadata: dict[str, Any] | None = None) -> None:
        with self.lock:
            pod = self._pod(namespace, name)
            if pod.get("spec", {}).get("nodeName"):
                raise Conflict(
                    f"pod {namespace}/{name} is already assigned to node {pod['spec']['nodeName']}",
                    reason="Conflict",
                    method="POST",
                    path="binding",
                )
            copied = {k: v for k, v in (metadata or {}).items() if k in ("annotations", "labels")}
            merge(pod, {"metadata": copied})
            pod.setdefault("spec", {})["nodeName"] = node
            pod.setdefault("status", {})["phase"] = "Running"
            merge(pod, {"metadata": {"annotations": {keys.BIND_PHASE: "success"}}})
            annotations = self.nodes[node]["metadata"].get("annotations") or {}
            if str(annotations.get(LOCK_KEY, "")).endswith(f",{namespace},{name}"):
                self.write_lock(node, None, str(self.versions.get(node, 0)))
            for key in self.stamp_keys:
                if key in annotations:
                    self.write_annotation(node, key, None)

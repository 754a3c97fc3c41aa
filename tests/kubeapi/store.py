"""In-memory object store with a global resourceVersion, a bounded event history for watches,
paged list snapshots, and the API server's write semantics (preconditions, status subresources,
finalizers, binding, eviction).

Stored objects are never mutated in place: every write stores a fresh dict, so list snapshots
and watch events can share references safely. Everything runs under one lock.
"""

from __future__ import annotations

import base64
import bisect
import datetime as _dt
import itertools
import json
import random
import string
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import patch as patchlib
from .resources import Registry, ResourceType

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def now_rfc3339(offset_seconds: float = 0) -> str:
    t = _dt.datetime.now(_dt.UTC) + _dt.timedelta(seconds=offset_seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


try:  # a product dependency; much faster than json/deepcopy for big objects
    import orjson as _orjson

    def dumps(obj: Any) -> bytes:
        return _orjson.dumps(obj)

    def clone(obj: Any) -> Any:
        """A deep copy of a JSON value."""
        return _orjson.loads(_orjson.dumps(obj))
except ImportError:  # pragma: no cover

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    def clone(obj: Any) -> Any:
        return json.loads(json.dumps(obj))


# -- errors -----------------------------------------------------------------------------------


class ApiError(Exception):
    """An error answered as a `Status` object."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict | None = None, retry_after: int | None = None
    ):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details
        self.retry_after = retry_after
        if retry_after is not None:
            self.details = {**(details or {}), "retryAfterSeconds": retry_after}

    def status(self) -> dict:
        st = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            st["details"] = self.details
        return st


def _details(rt: ResourceType | None, name: str | None, **extra) -> dict:
    d: dict = {}
    if name:
        d["name"] = name
    if rt is not None:
        if rt.group:
            d["group"] = rt.group
        d["kind"] = rt.plural
    d.update(extra)
    return d


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{rt.qualified} "{name}" not found', _details(rt, name))


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{rt.qualified} "{name}" already exists', _details(rt, name))


def conflict(rt: ResourceType, name: str, why: str | None = None, what: str | None = None) -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409, "Conflict", f'Operation cannot be fulfilled on {what or rt.qualified} "{name}": {why}', _details(rt, name)
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def invalid(rt: ResourceType, name: str, message: str) -> ApiError:
    return ApiError(422, "Invalid", f'{rt.kind} "{name}" is invalid: {message}', _details(rt, name))


# -- history ----------------------------------------------------------------------------------


@dataclass
class Event:
    rv: int
    type: str  # ADDED / MODIFIED / DELETED
    rt_key: tuple[str, str]
    namespace: str
    obj: dict
    prev: dict | None  # the object before the change (MODIFIED/DELETED), for selector transitions
    _line: bytes | None = None

    def line(self, obj: dict | None = None, type_: str | None = None) -> bytes:
        if obj is None and type_ is None:
            if self._line is None:
                self._line = dumps({"type": self.type, "object": self.obj}) + b"\n"
            return self._line
        return dumps({"type": type_ or self.type, "object": obj if obj is not None else self.obj}) + b"\n"


def _meta(obj: dict) -> dict:
    return obj.setdefault("metadata", {})


def _strip_rv(obj: dict) -> dict:
    o = dict(obj)
    m = dict(o.get("metadata") or {})
    m.pop("resourceVersion", None)
    o["metadata"] = m
    return o


def _typed(rt: ResourceType, obj: dict) -> dict:
    """The object with kind and apiVersion first, as the API server writes them."""
    rest = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    return {"kind": rt.kind, "apiVersion": rt.api_version, **rest}


def _drop_empty(meta: dict) -> None:
    """Go's omitempty: an emptied labels/annotations/finalizers/ownerReferences disappears."""
    for k in ("labels", "annotations", "finalizers", "ownerReferences"):
        if k in meta and not meta[k]:
            del meta[k]


def _spec_part(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _label_selector_matches(selector: dict | None, labels: dict) -> bool:
    """metav1.LabelSelector semantics (an empty selector matches everything)."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


class Store:
    def __init__(self, registry: Registry | None = None, history_size: int = 10_000, first_rv: int = 1000):
        self.registry = registry or Registry()
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.rv = first_rv
        self.history_size = history_size
        self.objects: dict[tuple[str, str], dict[tuple[str, str], dict]] = {}
        self.history: list[Event] = []
        self._history_rvs: list[int] = []
        self.compacted_rv = first_rv  # watches from an rv below this get 410
        self._snapshots: OrderedDict[str, tuple[int, list[dict]]] = OrderedDict()
        self._snapshot_ids = itertools.count(1)
        # With pod_graceful_delete, deleting a bound pod only sets deletionTimestamp (as a kubelet
        # would need to confirm); tests finish it with delete(..., grace_period_seconds=0).
        self.pod_graceful_delete = False

    # -- bookkeeping ---------------------------------------------------------------------------

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], dict]:
        return self.objects.setdefault(rt.key, {})

    def _record(self, type_: str, rt: ResourceType, ns: str, obj: dict, prev: dict | None) -> None:
        ev = Event(int(obj["metadata"]["resourceVersion"]), type_, rt.key, ns, obj, prev)
        self.history.append(ev)
        self._history_rvs.append(ev.rv)
        if len(self.history) > self.history_size + self.history_size // 4:  # trim in batches
            cut = len(self.history) - self.history_size
            self.compacted_rv = max(self.compacted_rv, self.history[cut - 1].rv)
            del self.history[:cut]
            del self._history_rvs[:cut]
        self.cond.notify_all()

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def compact(self) -> int:
        """Forget all history (as etcd compaction does): watches and continue tokens from any
        earlier resourceVersion now get 410. Returns the compacted revision."""
        with self.lock:
            self.compacted_rv = self.rv
            self.history.clear()
            self._history_rvs.clear()
            self._snapshots.clear()
            self.cond.notify_all()
            return self.rv

    def _ns_key(self, rt: ResourceType, ns: str | None) -> str:
        return (ns or "") if rt.namespaced else ""

    # -- reads ---------------------------------------------------------------------------------

    def get(self, rt: ResourceType, ns: str | None, name: str) -> dict:
        with self.lock:
            obj = self._bucket(rt).get((self._ns_key(rt, ns), name))
            if obj is None:
                raise not_found(rt, name)
            return obj

    def list(
        self,
        rt: ResourceType,
        ns: str | None,
        match: Callable[[dict], bool] | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> tuple[list[dict], int, str | None, int | None]:
        """Items (shared, do not mutate), list resourceVersion, continue token, remaining count."""
        with self.lock:
            if continue_token:
                try:
                    tok = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                    sid, list_rv, start = tok["id"], int(tok["rv"]), int(tok["start"])
                except Exception:
                    raise bad_request("continue key is not valid: incorrect encoded start resourceVersion")
                snap = self._snapshots.get(sid)
                if snap is None or list_rv < self.compacted_rv:
                    raise expired(
                        "The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter."
                    )
                items = snap[1]
            else:
                list_rv, start = self.rv, 0
                keys = sorted(k for k in self._bucket(rt) if not rt.namespaced or ns is None or k[0] == ns)
                bucket = self._bucket(rt)
                items = [bucket[k] for k in keys]
                if match is not None:
                    items = [o for o in items if match(o)]
                sid = None
            if not limit or start + limit >= len(items):
                return items[start:], list_rv, None, None
            if sid is None:
                sid = str(next(self._snapshot_ids))
                self._snapshots[sid] = (list_rv, items)
                while len(self._snapshots) > 256:
                    self._snapshots.popitem(last=False)
            end = start + limit
            token = base64.urlsafe_b64encode(dumps({"id": sid, "rv": list_rv, "start": end})).decode()
            return items[start:end], list_rv, token, len(items) - end

    def watch_start(
        self,
        rt: ResourceType,
        ns: str | None,
        resource_version: str | None,
        send_initial: bool | None,
        match: Callable[[dict], bool] | None,
    ) -> tuple[list[dict], int]:
        """Initial objects to send as ADDED, and the revision to stream events after."""
        with self.lock:
            if resource_version in (None, "", "0") or send_initial:
                items, rv, _, _ = self.list(rt, ns, match)
                if resource_version not in (None, "", "0") and send_initial:
                    self._check_rv(resource_version)
                return list(items), rv
            return [], self._check_rv(resource_version)

    def _check_rv(self, resource_version: str) -> int:
        try:
            rv = int(resource_version)
        except ValueError:
            raise bad_request(f"invalid resource version: {resource_version!r}")
        if rv < self.compacted_rv:
            raise expired(f"too old resource version: {rv} ({self.compacted_rv})")
        return rv

    def events_after(self, rv: int) -> list[Event]:
        """All events with a revision above rv (caller holds the lock or accepts a snapshot)."""
        with self.lock:
            if rv < self.compacted_rv:
                raise expired(f"too old resource version: {rv} ({self.compacted_rv})")
            i = bisect.bisect_right(self._history_rvs, rv)
            return self.history[i:]

    # -- writes --------------------------------------------------------------------------------

    def create(
        self, rt: ResourceType, ns: str | None, body: dict, *, keep_system_fields: bool = False, dry_run: bool = False
    ) -> dict:
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format")
        obj = clone(body)
        if obj.get("kind") not in (None, "", rt.kind) or obj.get("apiVersion") not in (None, "", rt.api_version):
            raise bad_request(
                f"the API version in the data ({obj.get('apiVersion')}) does not match the expected "
                f"API version ({rt.api_version})"
            )
        obj = _typed(rt, obj)
        meta = _meta(obj)
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + "".join(
                    random.choices(string.ascii_lowercase + string.digits, k=5)
                )
            else:
                raise invalid(rt, "", "metadata.name: Required value: name or generateName is required")
        name = meta["name"]
        if rt.namespaced:
            if ns is None:
                ns = meta.get("namespace") or "default"
            if meta.get("namespace") not in (None, "", ns):
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if not keep_system_fields or not meta.get("uid"):
            meta["uid"] = str(uuid.uuid4())
        if not keep_system_fields or not meta.get("creationTimestamp"):
            meta["creationTimestamp"] = now_rfc3339()
        if rt.tracks_generation and not keep_system_fields:
            meta["generation"] = 1
        if rt.custom and rt.has_status and not keep_system_fields:
            obj.pop("status", None)
        _drop_empty(meta)
        with self.lock:
            bucket = self._bucket(rt)
            key = (self._ns_key(rt, ns), name)
            if key in bucket:
                raise already_exists(rt, name)
            if dry_run:
                meta["resourceVersion"] = ""
                return obj
            meta["resourceVersion"] = self._next_rv()
            bucket[key] = obj
            self._record("ADDED", rt, key[0], obj, None)
            return obj

    def update(
        self,
        rt: ResourceType,
        ns: str | None,
        name: str,
        change: Callable[[dict], dict],
        *,
        subresource: str | None = None,
        require_rv: bool = False,
        raw: bool = False,
        dry_run: bool = False,
    ) -> dict:
        """Read-modify-write. `change` gets a deep copy of the current object and returns the new
        one. A metadata.resourceVersion left in the result is a precondition (409 on mismatch).
        `raw` skips the status-subresource rules (for test seeding and internal writes)."""
        with self.lock:
            bucket = self._bucket(rt)
            key = (self._ns_key(rt, ns), name)
            cur = bucket.get(key)
            if cur is None:
                raise not_found(rt, name)
            new = change(clone(cur))
            if not isinstance(new, dict):
                raise bad_request("the body of the request was in an unknown format")
            cur_meta, meta = cur["metadata"], _meta(new)
            if meta.get("name", name) != name:
                raise bad_request(
                    f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
                )
            if rt.namespaced and meta.get("namespace", key[0]) not in ("", key[0]):
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            want_rv = meta.get("resourceVersion")
            if want_rv not in (None, "") and want_rv != cur_meta["resourceVersion"]:
                raise conflict(rt, name)
            if require_rv and want_rv in (None, ""):
                raise invalid(rt, name, "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update")
            if meta.get("uid") not in (None, "") and meta["uid"] != cur_meta["uid"]:
                raise conflict(
                    rt,
                    name,
                    f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {cur_meta['uid']}",
                )
            if not raw and rt.has_status:
                if subresource == "status":
                    status = new.get("status")
                    new = clone(cur)
                    if status is None:
                        new.pop("status", None)
                    else:
                        new["status"] = status
                else:
                    if "status" in cur:
                        new["status"] = clone(cur["status"])
                    else:
                        new.pop("status", None)
            new = _typed(rt, new)
            meta = _meta(new)
            meta["name"] = name
            if rt.namespaced:
                meta["namespace"] = key[0]
            else:
                meta.pop("namespace", None)
            if not raw:
                for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
                    if f in cur_meta:
                        meta[f] = cur_meta[f]
                    else:
                        meta.pop(f, None)
                if rt.tracks_generation:
                    gen = cur_meta.get("generation", 1)
                    meta["generation"] = gen + 1 if _spec_part(new) != _spec_part(cur) else gen
            meta["resourceVersion"] = cur_meta["resourceVersion"]
            _drop_empty(meta)
            if new == cur:
                return cur  # a no-op write does not bump the resourceVersion
            if dry_run:
                return new
            if (
                meta.get("deletionTimestamp")
                and not meta.get("finalizers")
                and not meta.get("deletionGracePeriodSeconds")
            ):
                return self._remove(rt, key, cur)  # the last finalizer is gone
            meta["resourceVersion"] = self._next_rv()
            bucket[key] = new
            self._record("MODIFIED", rt, key[0], new, cur)
            return new

    def patch(
        self,
        rt: ResourceType,
        ns: str | None,
        name: str,
        content_type: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict:
        ct = (content_type or "").split(";")[0].strip().lower()
        if ct == MERGE_PATCH:
            if not isinstance(body, dict):
                raise bad_request("a merge patch must be a JSON object")
            fn = lambda cur: patchlib.merge_patch(cur, body)  # noqa: E731
        elif ct == STRATEGIC_MERGE_PATCH:
            if rt.custom:
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types include: "
                    f"{JSON_PATCH}, {MERGE_PATCH}, application/apply-patch+yaml",
                )
            if not isinstance(body, dict):
                raise bad_request("a strategic merge patch must be a JSON object")
            fn = lambda cur: patchlib.strategic_merge_patch(cur, body)  # noqa: E731
        elif ct == JSON_PATCH:
            fn = lambda cur: patchlib.json_patch(cur, body)  # noqa: E731
        else:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_MERGE_PATCH}",
            )
        try:
            return self.update(rt, ns, name, fn, subresource=subresource, dry_run=dry_run)
        except patchlib.PatchError as e:
            raise ApiError(
                422,
                "Invalid",
                f"the server rejected our request due to an error in our request: {e}",
                _details(rt, name),
            )

    def _remove(self, rt: ResourceType, key: tuple[str, str], cur: dict) -> dict:
        gone = clone(cur)
        gone["metadata"]["resourceVersion"] = self._next_rv()
        del self._bucket(rt)[key]
        self._record("DELETED", rt, key[0], gone, cur)
        return gone

    def delete(
        self, rt: ResourceType, ns: str | None, name: str, options: dict | None = None, dry_run: bool = False
    ) -> tuple[dict, bool]:
        """Returns (object, deleted_now). Objects with finalizers (or bound pods with graceful
        deletion enabled) only get a deletionTimestamp."""
        options = options or {}
        with self.lock:
            key = (self._ns_key(rt, ns), name)
            cur = self._bucket(rt).get(key)
            if cur is None:
                raise not_found(rt, name)
            pre = options.get("preconditions") or {}
            cur_meta = cur["metadata"]
            if pre.get("uid") and pre["uid"] != cur_meta["uid"]:
                raise conflict(
                    rt,
                    name,
                    f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {cur_meta['uid']}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != cur_meta["resourceVersion"]:
                raise conflict(
                    rt,
                    name,
                    f"Precondition failed: ResourceVersion in precondition: "
                    f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                    f"{cur_meta['resourceVersion']}",
                )
            if dry_run:
                return cur, False
            grace = options.get("gracePeriodSeconds")
            graceful = (
                rt.key == ("", "pods")
                and self.pod_graceful_delete
                and (cur.get("spec") or {}).get("nodeName")
                and grace != 0
            )
            if cur_meta.get("finalizers") or graceful:
                if cur_meta.get("deletionTimestamp"):
                    return cur, False
                if grace is None:
                    grace = (cur.get("spec") or {}).get("terminationGracePeriodSeconds", 30) if graceful else 0
                new = clone(cur)
                new["metadata"]["deletionTimestamp"] = now_rfc3339(grace)
                new["metadata"]["deletionGracePeriodSeconds"] = grace
                new["metadata"]["resourceVersion"] = self._next_rv()
                self._bucket(rt)[key] = new
                self._record("MODIFIED", rt, key[0], new, cur)
                return new, False
            return self._remove(rt, key, cur), True

    # -- subresources --------------------------------------------------------------------------

    def bind(self, ns: str, name: str, binding: dict) -> None:
        pods = self.registry.get("", "v1", "pods")
        target = (binding or {}).get("target") or {}
        if target.get("kind") not in (None, "", "Node") or not target.get("name"):
            raise invalid(pods, name, "target: Invalid value: must name a Node")
        bmeta = (binding or {}).get("metadata") or {}

        def assign(pod: dict) -> dict:
            meta = pod["metadata"]
            if bmeta.get("uid") and bmeta["uid"] != meta["uid"]:
                raise conflict(
                    pods,
                    name,
                    f"Precondition failed: UID in precondition: {bmeta['uid']}, UID in object meta: {meta['uid']}",
                    what="pods/binding",
                )
            if meta.get("deletionTimestamp"):
                raise conflict(
                    pods, name, f"pod {name} is being deleted, cannot be assigned to a host", what="pods/binding"
                )
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                raise conflict(pods, name, f'pod {name} is already assigned to node "{node}"', what="pods/binding")
            pod.setdefault("spec", {})["nodeName"] = target["name"]
            if bmeta.get("annotations"):
                meta.setdefault("annotations", {}).update(bmeta["annotations"])
            if bmeta.get("labels"):  # as kube-apiserver 1.35+ does (PodTopologyLabelsAdmission, on by default)
                meta.setdefault("labels", {}).update(bmeta["labels"])
            status = pod.setdefault("status", {})
            conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append(
                {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
            )
            status["conditions"] = conds
            meta.pop("resourceVersion", None)
            return pod

        self.update(pods, ns, name, assign, raw=True)

    def evict(self, ns: str, name: str, eviction: dict) -> None:
        """policy/v1 Eviction: honours a matching PodDisruptionBudget's status.disruptionsAllowed."""
        pods = self.registry.get("", "v1", "pods")
        pdbs = self.registry.get("policy", "v1", "poddisruptionbudgets")
        options = (eviction or {}).get("deleteOptions") or {}
        dry_run = bool(options.get("dryRun"))
        with self.lock:
            pod = self.get(pods, ns, name)
            phase = (pod.get("status") or {}).get("phase")
            labels = pod["metadata"].get("labels") or {}
            ignore_pdb = phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))
            if not ignore_pdb:
                matching = [
                    p
                    for p in self._bucket(pdbs).values()
                    if p["metadata"]["namespace"] == ns
                    and _label_selector_matches((p.get("spec") or {}).get("selector"), labels)
                ]
                if len(matching) > 1:
                    raise ApiError(
                        500,
                        "InternalError",
                        "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                        "does not support.",
                    )
                if matching:
                    pdb = matching[0]
                    st = pdb.get("status") or {}
                    if int(st.get("disruptionsAllowed") or 0) <= 0:
                        raise ApiError(
                            429,
                            "TooManyRequests",
                            "Cannot evict pod as it would violate the pod's disruption budget.",
                            {
                                "causes": [
                                    {
                                        "reason": "DisruptionBudget",
                                        "message": f"The disruption budget {pdb['metadata']['name']} needs "
                                        f"{st.get('desiredHealthy', 0)} healthy pods and has "
                                        f"{st.get('currentHealthy', 0)} currently",
                                    }
                                ]
                            },
                        )
                    if not dry_run:

                        def spend(p: dict) -> dict:
                            s = p.setdefault("status", {})
                            s["disruptionsAllowed"] = int(s.get("disruptionsAllowed") or 0) - 1
                            s.setdefault("disruptedPods", {})[name] = now_rfc3339()
                            return p

                        self.update(pdbs, ns, pdb["metadata"]["name"], spend, raw=True)
            self.delete(pods, ns, name, options, dry_run=dry_run)

    # -- helpers for tests ---------------------------------------------------------------------

    def seed(self, obj: dict) -> dict:
        """Store an object as given (uid, creationTimestamp, status kept); only the
        resourceVersion is assigned. The type comes from apiVersion/kind."""
        rt = self.registry.by_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
        if rt is None:
            raise KeyError(f"no resource for {obj.get('apiVersion')}/{obj.get('kind')}")
        return self.create(rt, (obj.get("metadata") or {}).get("namespace"), obj, keep_system_fields=True)

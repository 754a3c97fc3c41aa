"""Pinning webhook: a hami-scheduler pod whose labels match a validated, unclaimed placement gets a
required node affinity on the target node and `nvidia.com/use-gpuuuid` with the target UUIDs.

Placements are read from memory: an informer lists them once and then watches (re-listing on 410
Gone, reconnecting with backoff), so an admission makes no LIST. A placement is claimed before the
patch is returned, by a status write carrying the cached resourceVersion: of several pods created
at once (in this process or in other replicas), exactly one wins; the others are admitted
unchanged. A stale cache costs one conflict and one GET, never a second pin. A placement past its
TTL (Pending, never claimed) no longer pins, whether or not the controller has marked it yet.

Several replicas: the leader evicts only placements its own cache holds (validated by its own
write), so its webhook never misses one. A follower's watch may lag the leader's writes, and the
replacement of a pod the leader just evicted can reach a follower first: a follower confirms a
miss with one consistent read of the namespace's placements (`leading` tells which it is). So does
a new leader until its cache has caught up (`CatchUp`): the previous leader's last evictions may
still be on their way to this replica's watch. Caught up is a fact, not a wait: the watch has
delivered a resourceVersion at or past the one of a consistent read taken after this term began
(the first confirming read). That costs followers one LIST per unpinned hami-scheduler pod; a
leader pays it only until its watch has passed that read (an event or a bookmark).
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from hami_fast.descheduler import kube as k
from hami_fast.descheduler import status as s
from hami_fast.descheduler.config import DEFAULTS
from hami_fast.descheduler.placement import Placement, StatusUpdate, claim
from hami_fast.kube.client import KubeClient
from hami_fast.kube.errors import ApiError, Conflict

if TYPE_CHECKING:
    from hami_fast.descheduler.cache import Informer

log = logging.getLogger("hami_fast.descheduler.webhook")

OPEN_PHASES = s.OPEN


def _revision(version: str) -> int | None:
    """kube-apiserver's resourceVersions are etcd revisions: one integer order over every object
    and every watch. Anything else is opaque (None): a cache is then never taken as caught up."""
    return int(version) if version.isdigit() else None


class CatchUp:
    """Whether this replica's placement cache holds every placement written before its term as
    leader began. A consistent LIST taken after the term began (`target`) contains them all; once
    the watch has delivered a resourceVersion at or past it (any event or bookmark: the watch
    sends them in revision order), the cache has applied every write the LIST saw."""

    def __init__(self, term: int, started: float) -> None:
        self.term, self.started = term, started
        self.target: int | None = None
        self.caught_up_after: float | None = None  # seconds from the term's first admission, once caught up

    def listed(self, version: str) -> None:
        if self.target is None:
            self.target = _revision(version)

    def done(self, watched: str, now: float) -> bool:
        if self.caught_up_after is not None:
            return True
        seen = _revision(watched)
        if self.target is None or seen is None or seen < self.target:
            return False
        self.caught_up_after = now - self.started
        log.info(
            "placement cache caught up: trusted from here on",
            extra={"resourceVersion": watched, "listed": self.target, "after_seconds": round(self.caught_up_after, 3)},
        )
        return True


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def pin_patch(pod: dict[str, Any], placement: Placement) -> list[dict[str, Any]]:
    """JSON Patch: stamp annotations, the UUID pins (`nvidia.com/use-gpuuuid`, or each backend's own
    key as validation chose them), and a required node affinity on the target node."""
    spec, status = placement.spec, placement.status
    uuids = status.resolved_uuids
    node = spec.node_name
    ops: list[dict[str, Any]] = []
    pins = status.pin_annotations or {k.USE_UUID: ",".join(uuids)}
    annotations = {
        **pins,
        k.STAMP_NAME: placement.key,
        k.STAMP_REQ_ID: spec.req_id,
        k.STAMP_TARGET: f"{node}/{','.join(uuids)}",
    }
    if not (pod.get("metadata") or {}).get("annotations"):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": annotations})
    else:
        ops += [
            {"op": "add", "path": f"/metadata/annotations/{_escape(key)}", "value": value}
            for key, value in annotations.items()
        ]
    requirement = {"key": "metadata.name", "operator": "In", "values": [node]}
    term = {"matchFields": [requirement]}
    pod_spec = pod.get("spec") or {}
    affinity = pod_spec.get("affinity")
    required = {"nodeSelectorTerms": [term]}
    if not affinity:
        ops.append(
            {
                "op": "add",
                "path": "/spec/affinity",
                "value": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
            }
        )
    elif not affinity.get("nodeAffinity"):
        ops.append(
            {
                "op": "add",
                "path": "/spec/affinity/nodeAffinity",
                "value": {"requiredDuringSchedulingIgnoredDuringExecution": required},
            }
        )
    elif not affinity["nodeAffinity"].get("requiredDuringSchedulingIgnoredDuringExecution"):
        ops.append(
            {
                "op": "add",
                "path": "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                "value": required,
            }
        )
    else:
        terms = (
            affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].get("nodeSelectorTerms") or []
        )
        base = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"
        if not terms:
            ops.append({"op": "add", "path": base, "value": [term]})
        for i, t in enumerate(terms):
            if t.get("matchFields"):
                ops.append({"op": "add", "path": f"{base}/{i}/matchFields/-", "value": requirement})
            else:
                ops.append({"op": "add", "path": f"{base}/{i}/matchFields", "value": [requirement]})
    return ops


class Pinner:
    def __init__(
        self,
        client: KubeClient | None,
        scheduler_name: str = k.SCHEDULER_NAME,
        placements: Informer | None = None,
        ttl: float = DEFAULTS.placement_ttl,
        stop: threading.Event | None = None,
        sync_timeout: float = 5.0,
        leading: Callable[[], bool] | None = None,
        term: Callable[[], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        engine_config: bytes | None = None,
    ) -> None:
        """`placements`: a shared informer (the controller's); without one the pinner starts its own
        on the first admission, ended by `stop` or `close()`. `leading`: whether this replica leads
        (None: the only replica); a follower, and a leader whose cache has not caught up, confirms
        a cache miss with a consistent read. `term`: how many times this replica took the lease
        (a lease lost and won back between two admissions is a new term). `engine_config`: the
        engine's settings (the device config), to read every backend's devices on the target."""
        self.engine_config = engine_config
        self.client, self.scheduler_name, self.ttl, self.sync_timeout = client, scheduler_name, ttl, sync_timeout
        self.leading, self.term, self.clock = leading, term, clock
        self.catch_up: CatchUp | None = None  # this term's, once an admission saw this replica lead
        self.stop = stop or threading.Event()
        self.placements = placements
        self.lock = threading.Lock()

    def informer(self) -> Informer | None:
        if self.placements is None and self.client is not None:
            from hami_fast.descheduler.cache import placement_informer

            with self.lock:
                if self.placements is None:
                    self.placements = placement_informer(self.client, self.stop)
        if self.placements is not None:
            self.placements.start()
        return self.placements

    def close(self) -> None:
        self.stop.set()

    def _api(self) -> KubeClient:
        """The API client: `pin` admits pods unpinned before any read or write when there is none."""
        if self.client is None:
            raise RuntimeError("the placement pinner has no API client")
        return self.client

    def open_placements(self, namespace: str, labels: dict[str, str]) -> list[Placement]:
        """Validated (for their current spec), unclaimed, unexpired placements in `namespace` whose
        selector matches, oldest first."""
        informer = self.informer()
        if informer is None:
            return []
        if not informer.wait_synced(self.sync_timeout):
            log.warning("placements not synced yet: pod admitted without a pin")
            return []
        candidates = self._open_in_cache(informer, namespace, labels)
        if candidates or not labels:
            return candidates
        lagging, catch_up = self._may_lag(informer)
        if lagging:
            # The leader may have validated a placement and evicted its pod before this replica's
            # watch delivered it: confirm the miss with a consistent read (no resourceVersion).
            fresh, version = k.list_placements_at(self._api(), namespace)
            for placement in fresh:
                informer.store.put(placement)
            if catch_up is not None:  # taken while leading: the term's first read sets the target
                catch_up.listed(version)
            candidates = self._open_in_cache(informer, namespace, labels)
        return candidates

    def _may_lag(self, informer: Informer) -> tuple[bool, CatchUp | None]:
        """Whether this replica's cache may lack a placement whose pod another replica evicted:
        it follows, or it leads and its watch has not yet passed a consistent read of this term.
        Also this term's `CatchUp` while leading."""
        if self.leading is None:
            return False, None
        if not self.leading():
            self.catch_up = None
            return True, None
        term = self.term() if self.term is not None else 0
        catch_up = self.catch_up
        if catch_up is None or catch_up.term != term:
            catch_up = self.catch_up = CatchUp(term, self.clock())
        return not catch_up.done(informer.reflector.stats.resource_version, self.clock()), catch_up

    def _open_in_cache(self, informer: Informer, namespace: str, labels: dict[str, str]) -> list[Placement]:
        def pins(p: Placement) -> bool:
            status = p.status
            return (
                p.namespace == namespace
                and status.phase in OPEN_PHASES
                and not status.claimed_by
                and bool(status.resolved_uuids)
                and p.spec.selects(labels)
                and not p.expired(self.ttl)
                and not p.spec_changed  # resolvedUUIDs describe an older spec: wait for the re-validation
            )

        candidates = [Placement(body) for body in informer.store.select(lambda body: pins(Placement(body)))]
        candidates.sort(key=lambda p: (p.created_at, p.name))
        return candidates

    def _remember(self, written: dict[str, Any]) -> Placement:
        if self.placements is not None:
            self.placements.store.put(written)
        return Placement(written)

    def target_problem(self, placement: Placement) -> str:
        """'' when the target node, read now, still takes the pin: registered, and its resolved GPUs
        there, healthy and not cordoned, as the engine's target check says; else `field: why`."""
        from hami_fast import _native

        node_name, uuids = placement.spec.node_name, placement.status.resolved_uuids
        node = k.get_node(self._api(), node_name)
        if node is None:
            return f"spec.nodeName: node {node_name} not found"
        target = _native.ObjectCache(self.engine_config)
        target.apply(orjson.dumps(node), "node")
        check = orjson.loads(target.validate_target("", node_name, uuids))
        return "" if check["ok"] else f"{check['field']}: {check['message']}"

    def admit(self, body: bytes) -> bytes:
        try:
            review = orjson.loads(body)
            request = review["request"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            return orjson.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {"uid": "", "allowed": True, "warnings": [f"unreadable AdmissionReview: {exc}"]},
                }
            )
        response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
        try:
            patch = self.pin(request)
        except ApiError as exc:  # never block pod creation (failurePolicy Ignore semantics)
            log.warning("pinning skipped: %s", exc)
            patch = None
        if patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(orjson.dumps(patch)).decode()
        return orjson.dumps(
            {
                "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
                "kind": "AdmissionReview",
                "response": response,
            }
        )

    def _claim(self, placement: Placement, pod_meta: dict[str, Any], attempts: int = 5) -> Placement | None:
        """Claim with a resourceVersion-guarded status write. A conflict may come from the controller's
        own status update rather than a rival claim: re-read, and retry while the placement is still
        open and unclaimed."""
        pod_name, generate_name = pod_meta.get("name") or "", pod_meta.get("generateName") or ""
        admitted = (s.CLAIMED, True, s.POD_ADMITTED, f"pod {pod_name or generate_name + '*'} admitted with the pin")
        for _ in range(attempts):
            stamp = k.now_rfc3339()
            update = StatusUpdate(claimed_by=claim(pod_name, generate_name, stamp), consumed_at=stamp)
            try:
                return self._remember(k.put_status(self._api(), placement.with_status(update, admitted).body))
            except Conflict:
                pass
            fresh = k.get_placement(self._api(), placement.namespace, placement.name)
            if fresh is None:
                return None
            placement = Placement(fresh)
            if placement.status.phase not in OPEN_PHASES or placement.status.claimed_by:
                return None
        return None

    def pin(self, request: dict[str, Any]) -> list[dict[str, Any]] | None:
        pod = request.get("object") or {}
        if request.get("operation", "CREATE") != "CREATE" or (request.get("kind") or {}).get("kind", "Pod") != "Pod":
            return None
        if (pod.get("spec") or {}).get("schedulerName") != self.scheduler_name or self.client is None:
            return None
        if request.get("dryRun"):
            return None
        meta = pod.get("metadata") or {}
        namespace = request.get("namespace") or meta.get("namespace") or "default"
        labels = meta.get("labels") or {}
        candidates = self.open_placements(namespace, labels)
        with self.lock:
            for placement in candidates:
                problem = self.target_problem(placement)
                if problem:
                    self._fail_at_admission(placement, problem)
                    continue
                claimed = self._claim(placement, meta)
                if claimed is None:
                    continue  # another pod or replica claimed it first
                log.info("pinned pod to placement", extra={"placement": placement.key})
                return pin_patch(pod, claimed)
        return None

    def _fail_at_admission(self, placement: Placement, problem: str) -> None:
        """Never leave an unschedulable pin: the pod is admitted as it is, the placement fails."""
        try:
            placement.check_transition(s.FAILED)
        except s.IllegalTransition as exc:
            log.error("%s", exc)
            return
        message = f"target no longer valid at admission: {problem}; nothing was pinned"
        failed = placement.with_status(
            StatusUpdate(phase=s.FAILED, message=message), (s.VALIDATED, False, s.TARGET_GONE, message)
        )
        try:
            self._remember(k.put_status(self._api(), failed.body))
        except ApiError as exc:
            log.info("placement not marked failed: %s", exc)

"""vGPU-aware preemption, carried out: the engine names a pending pod, the node, the GPUs and the
lower-priority victims (and holds those GPUs at once); this thread checks the victims'
PodDisruptionBudgets with a dry-run eviction, writes the hold on the pod (the descheduler's
reservation, which survives restarts), sets `status.nominatedNodeName` as kube-scheduler does, evicts
the victims with their own grace period, and posts Events on both sides. Nothing is decided here
(docs/pending-pods.md)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from hami_fast._native import Cluster
from hami_fast.descheduler.apply import write_reservation
from hami_fast.kube.client import MERGE_PATCH, KubeClient, path_of, pod_path
from hami_fast.kube.errors import ApiError, NotFound, TooManyRequests
from hami_fast.server.budgets import shortfall
from hami_fast.server.metrics import Metrics
from hami_fast.server.requeue import TokenBucket
from hami_fast.server.wakeloop import WakeLoop

log = logging.getLogger("hami_fast.preempt")

# The hold lasts the victims' longest grace period plus this margin, for kube-scheduler to come back.
HOLD_MARGIN = 60.0
# A preemption a disruption budget refused is tried again this long after, node change or not: a
# budget's status changing (a replica Ready again) is no node change, so nothing else would.
BLOCKED_RETRY = 30.0
DEFAULT_GRACE = 30.0  # a pod's terminationGracePeriodSeconds when unset

Emit = Callable[[dict[str, Any], str, str, str, str], None]


@dataclass
class PreemptionApi:
    """The API calls a preemption makes."""

    client: KubeClient

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.client.get_pod(namespace, name)
        except NotFound:
            return None

    def evict(self, pod: dict[str, Any], dry_run: bool) -> None:
        """policy/v1 Eviction with the pod's UID as precondition; a 429 means a PDB forbids it."""
        meta = pod["metadata"]
        options: dict[str, Any] = {"preconditions": {"uid": meta["uid"]}}
        if dry_run:
            options["dryRun"] = ["All"]
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "deleteOptions": options,
        }
        path = pod_path(meta["namespace"], meta["name"], "eviction")
        self.client.request("POST", path, body=orjson.dumps(body))

    def budgets(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's PodDisruptionBudgets."""
        path = path_of("apis", "policy", "v1", "namespaces", namespace, "poddisruptionbudgets")
        items: list[dict[str, Any]] = self.client.request("GET", path).json()["items"]
        return items

    def hold(self, preemption: dict[str, Any], ttl: float) -> None:
        pod = f"{preemption['namespace']}/{preemption['name']}"
        gpus = {"pod": pod, "uid": preemption["uid"], "node": preemption["node"], "gpus": preemption["gpus"]}
        write_reservation(self.client, gpus, ttl)

    def nominate(self, preemption: dict[str, Any]) -> None:
        body = {"metadata": {"uid": preemption["uid"]}, "status": {"nominatedNodeName": preemption["node"]}}
        path = pod_path(preemption["namespace"], preemption["name"], "status")
        self.client.request("PATCH", path, body=orjson.dumps(body), content_type=MERGE_PATCH)


def who(victim: dict[str, Any]) -> str:
    return f"{victim['namespace']}/{victim['name']} (priority {victim['priority']})"


def grace_of(pod: dict[str, Any]) -> float:
    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return DEFAULT_GRACE if grace is None else float(grace)


def ref(pod: dict[str, Any]) -> dict[str, Any]:
    """What an Event names of a pod."""
    meta = pod.get("metadata") or pod
    keys = ("namespace", "name", "uid", "resourceVersion")
    return {k: meta[k] for k in keys if meta.get(k)}


class Preemptor(WakeLoop):
    """Asks the engine after every wake (a Filter rejection, a pod or node event) and every `period`
    seconds, at most once per `min_gap`, and carries out the preemptions it names as the rate allows."""

    def __init__(
        self,
        cluster: Cluster,
        api: PreemptionApi,
        emit: Emit,
        metrics: Metrics,
        ready: Callable[[], bool],
        stop: threading.Event,
        bucket: TokenBucket,
        component: str,
        period: float = 2.0,
        min_gap: float = 0.2,
        hold_margin: float = HOLD_MARGIN,
        blocked_retry: float = BLOCKED_RETRY,
    ) -> None:
        super().__init__("preempt", stop, ready, period, min_gap)
        self.cluster, self.api, self.emit, self.metrics = cluster, api, emit, metrics
        self.bucket, self.component, self.hold_margin = bucket, component, hold_margin
        self.blocked_retry = blocked_retry
        # pod key: when (monotonic) to look at it again, and the victims a budget refused
        self.blocked: dict[str, tuple[float, frozenset[str]]] = {}

    what = "preemption pass"

    def pass_once(self) -> None:
        self.preempt_once()

    def preempt_once(self) -> int:
        """One pass; how many preemptions were carried out."""
        self._look_again_at_blocked()
        answer = orjson.loads(self.cluster.preempt(int(time.time())))
        if answer["more"]:
            self.wake()
        done = 0
        for preemption in answer["preemptions"]:
            if self._refused_lately(preemption):
                self.cluster.unhold(preemption["key"])
                continue
            if not self.bucket.take(self.stop_event):
                self.cluster.unhold(preemption["key"])  # stopping: the next leader decides again
                continue
            done += self.carry_out(preemption)
        return done

    def carry_out(self, preemption: dict[str, Any]) -> int:
        try:
            victims = self._victims(preemption)
            refused = victims is not None and self._refused(preemption, victims)
        except ApiError as exc:  # the API server unreachable: nothing done, the hold dropped
            self.cluster.unhold(preemption["key"])
            self.metrics.preemptions.labels("failed").inc()
            log.warning("preemption victims not checked", extra={"pod": _key(preemption), "error": str(exc)})
            return 0
        if victims is None or refused:
            self.cluster.unhold(preemption["key"])
            self.metrics.preemptions.labels("blocked").inc()
            if refused:
                self.blocked[preemption["key"]] = (time.monotonic() + self.blocked_retry, _victim_keys(preemption))
            return 0
        self.blocked.pop(preemption["key"], None)
        ttl = max([grace_of(v) for v in victims], default=DEFAULT_GRACE) + self.hold_margin
        try:
            self.api.hold(preemption, ttl)
        except ApiError as exc:
            self.cluster.unhold(preemption["key"])
            self.metrics.preemptions.labels("failed").inc()
            log.warning("preemption hold not written", extra={"pod": _key(preemption), "error": str(exc)})
            return 0
        self._nominate(preemption)
        gone = [v for v, pod in zip(preemption["victims"], victims, strict=True) if self._evict(preemption, v, pod)]
        self._announce(preemption, gone, ttl)
        self.metrics.preemptions.labels("done" if len(gone) == len(victims) else "incomplete").inc()
        self.metrics.preemption_victims.inc(len(gone))
        return 1

    def _look_again_at_blocked(self) -> None:
        """The pods whose preemption was refused long enough ago are looked at again (a pod no
        longer waiting is forgotten)."""
        now = time.monotonic()
        for key in [k for k, (due, _) in self.blocked.items() if due <= now]:
            del self.blocked[key]
            self.cluster.look_again(key)

    def _refused_lately(self, preemption: dict[str, Any]) -> bool:
        """The same victims a budget refused for this pod, named again before the retry is due: a
        node changing for another reason (a handshake, a registration) is not asked about again."""
        due, victims = self.blocked.get(preemption["key"], (0.0, frozenset()))
        return time.monotonic() < due and victims == _victim_keys(preemption)

    def _victims(self, preemption: dict[str, Any]) -> list[dict[str, Any]] | None:
        """Each victim as the API server has it now; None when one is gone or already going (the
        engine sees that change and looks again)."""
        pods = []
        for v in preemption["victims"]:
            pod = self.api.get_pod(v["namespace"], v["name"])
            meta = (pod or {}).get("metadata") or {}
            if pod is None or meta.get("deletionTimestamp") or (v["key"] != meta.get("uid") and "/" not in v["key"]):
                return None
            pods.append(pod)
        return pods

    def _refused(self, preemption: dict[str, Any], victims: list[dict[str, Any]]) -> bool:
        """A dry-run eviction of every victim, then their PodDisruptionBudgets taken together: True
        (and a PreemptionBlocked Event) at the first refusal."""
        for v, pod in zip(preemption["victims"], victims, strict=True):
            try:
                self.api.evict(pod, dry_run=True)
            except ApiError as exc:
                why = "a PodDisruptionBudget forbids evicting" if isinstance(exc, TooManyRequests) else "cannot evict"
                self._blocked(preemption, f"{why} {who(v)}: {exc.message}")
                return True
        return self._over_budget(preemption, victims)

    def _over_budget(self, preemption: dict[str, Any], victims: list[dict[str, Any]]) -> bool:
        if len(victims) < 2:
            return False  # the dry run was the whole check
        namespaces = sorted({v["metadata"]["namespace"] for v in victims})
        budgets = [pdb for ns in namespaces for pdb in self.api.budgets(ns)]
        short = shortfall(victims, budgets)
        if short is not None:
            self._blocked(preemption, f"{short.message()}: evicting them would break it")
        return short is not None

    def _blocked(self, preemption: dict[str, Any], why: str) -> None:
        message = f"vGPU preemption on node {preemption['node']} not done: {why}"
        self.emit(_ref_of(preemption), "Warning", "PreemptionBlocked", message, self.component)
        log.info("preemption blocked", extra={"pod": _key(preemption), "error": why})

    def _nominate(self, preemption: dict[str, Any]) -> None:
        try:
            self.api.nominate(preemption)
        except ApiError as exc:  # the hold is what keeps the GPUs; the nomination is information
            log.warning("nominatedNodeName not set", extra={"pod": _key(preemption), "error": str(exc)})

    def _evict(self, preemption: dict[str, Any], victim: dict[str, Any], pod: dict[str, Any]) -> bool:
        try:
            self.api.evict(pod, dry_run=False)
        except ApiError as exc:
            message = (
                f"{who(victim)} was not evicted ({exc.message}); the GPUs held for this pod on node "
                f"{preemption['node']} stay held until the hold expires, then the pod is retried"
            )
            self.emit(_ref_of(preemption), "Warning", "PreemptionIncomplete", message, self.component)
            log.warning("victim not evicted", extra={"pod": _key(preemption), "victim": who(victim), "error": str(exc)})
            return False
        message = (
            f"Preempted by {_key(preemption)} (priority {preemption['priority']}) for vGPU on node "
            f"{preemption['node']}: GPUs {', '.join(preemption['gpus'])} are held for it"
        )
        self.emit(ref(pod), "Normal", "Preempted", message, self.component)
        return True

    def _announce(self, preemption: dict[str, Any], gone: list[dict[str, Any]], ttl: float) -> None:
        if not gone:
            return
        message = (
            f"Evicting {len(gone)} lower-priority pod(s) on node {preemption['node']} to free vGPU for this pod: "
            f"{', '.join(who(v) for v in gone)}; GPUs {', '.join(preemption['gpus'])} held for {ttl:.0f} s"
        )
        self.emit(_ref_of(preemption), "Normal", "Preempting", message, self.component)
        log.info("preempting", extra={"pod": _key(preemption), "node": preemption["node"], "victims": len(gone)})


def _victim_keys(preemption: dict[str, Any]) -> frozenset[str]:
    return frozenset(v["key"] for v in preemption["victims"])


def _key(preemption: dict[str, Any]) -> str:
    return f"{preemption['namespace']}/{preemption['name']}"


def _ref_of(preemption: dict[str, Any]) -> dict[str, Any]:
    return {"namespace": preemption["namespace"], "name": preemption["name"], "uid": preemption["uid"]}

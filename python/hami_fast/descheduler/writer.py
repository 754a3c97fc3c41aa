"""The controller's writes of a placement: its status (through the status subresource, guarded by
the cached resourceVersion, each phase change checked against `status.TRANSITIONS`) and the audit
Event a phase change posts."""

from __future__ import annotations

import dataclasses
import logging

import orjson

from hami_fast.descheduler import kube as k
from hami_fast.descheduler import status as s
from hami_fast.descheduler.cache import ObjectStore
from hami_fast.descheduler.placement import Placement, StatusUpdate
from hami_fast.kube.client import KubeClient
from hami_fast.kube.errors import ApiError, Conflict, NotFound

log = logging.getLogger("hami_fast.descheduler.controller")

COMPONENT = "hami-gpu-descheduler"


class StatusWriter:
    def __init__(self, client: KubeClient, store: ObjectStore) -> None:
        self.client, self.store = client, store

    def write(
        self, placement: Placement, update: StatusUpdate | None = None, condition: s.Condition | None = None
    ) -> Placement | None:
        """One status write; None when refused (a phase change the state machine does not allow,
        logged), or when the placement was deleted or changed under us (the watch brings it)."""
        update = update or StatusUpdate()
        try:
            placement.check_transition(update.phase)
        except s.IllegalTransition as exc:
            log.error("%s", exc)
            return None
        try:
            written = k.put_status(self.client, placement.with_status(update, condition).body)
        except (NotFound, Conflict):
            return None
        self.store.put(written)
        old_phase, new_phase = placement.status.phase, update.phase
        if new_phase and new_phase != old_phase:
            event_type, reason = s.PHASE_EVENTS[new_phase]
            if new_phase == s.FAILED and condition:
                reason = condition[2]
            self.event(placement, event_type, reason, update.message or "")
        return Placement(written)

    def record(
        self, placement: Placement, update: StatusUpdate, condition: s.Condition, attempts: int = 3
    ) -> Placement | None:
        """A write of something done that must not be lost (an eviction made): a write that met
        another writer (the webhook claiming the placement for the replacement pod, which the
        eviction let in) is made again on the placement read back; where the phase has moved on
        meanwhile, the fields are kept and the phase left as it is."""
        for _ in range(attempts):
            written = self.write(placement, update, condition)
            if written is not None:
                return written
            body = k.get_placement(self.client, placement.namespace, placement.name)
            if body is None:
                return None
            placement = Placement(body)
            self.store.put(body)
            try:
                placement.check_transition(update.phase)
            except s.IllegalTransition:
                update = dataclasses.replace(update, phase=None, message=None)
        return None

    def fail(self, placement: Placement, condition: s.Condition) -> None:
        message = condition[3]
        log.info("placement failed", extra={"placement": placement.key, "reason": message})
        self.write(placement, StatusUpdate(phase=s.FAILED, message=message), condition)

    def event(self, placement: Placement, event_type: str, reason: str, message: str) -> None:
        """An audit Event on the placement (best effort: a failed post never stops a move)."""
        stamp = k.now_rfc3339()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{placement.name}.", "namespace": placement.namespace},
            "involvedObject": {
                "apiVersion": f"{k.GROUP}/{k.VERSION}",
                "kind": "HamiPodPlacement",
                "namespace": placement.namespace,
                "name": placement.name,
                "uid": placement.uid,
            },
            "type": event_type,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        path = f"/api/v1/namespaces/{placement.namespace}/events"
        try:
            self.client.request("POST", path, body=orjson.dumps(body))
        except ApiError as exc:
            log.debug("event not posted: %s", exc)

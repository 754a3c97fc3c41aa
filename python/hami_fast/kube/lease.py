"""coordination.k8s.io/v1 Leases: read one, decide who holds it, and keep a `leading` Event up to date.

Two users, one implementation:
- `LeaseFollower` (the extender): HAMi's rule, it never writes; this replica leads while the holder
  of kube-scheduler's Lease starts with our hostname and the Lease has not expired.
- `LeaseElector` (the descheduler): client-go's rule on its own Lease; create it, renew it while
  held, take it over once the holder let it expire. Writes carry the read's resourceVersion, so of
  two replicas racing for an expired Lease exactly one wins (the other gets 409).

A Lease is valid while `renewTime + leaseDurationSeconds` is after now (client-go's check).

`leading` is a `Leadership`: set by a poll until the moment the Lease read (or written) stops being
valid, so a replica that was paused past that moment (SIGSTOP, a long GC, a frozen VM) reads "not
leading" at once, before its next poll, and writes nothing another leader may be writing.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from hami_fast.kube import times
from hami_fast.kube.client import KubeClient, path_of
from hami_fast.kube.errors import ApiError, NotFound

log = logging.getLogger("hami_fast.lease")


class NotLeading(Exception):
    """This replica's term ended: it writes nothing another leader may be writing."""


def leading_guard(leading: Leadership) -> Callable[[], None]:
    """A request guard (`KubeClient.request`) raising NotLeading once `leading` is not set."""

    def guard() -> None:
        if not leading.is_set():
            raise NotLeading("hami-fast is not the leader: this replica does not bind")

    return guard


def lease_path(namespace: str, name: str | None = None) -> str:
    return path_of("apis", "coordination.k8s.io", "v1", "namespaces", namespace, "leases", *([name] if name else []))


@dataclass(frozen=True)
class LeaseState:
    """The parts of `spec` leadership depends on. `duration` is 0 when the Lease does not say."""

    holder: str
    renewed: datetime | None
    duration: int
    transitions: int

    @classmethod
    def of(cls, lease: dict[str, Any]) -> LeaseState:
        """Raises ValueError for an unparsable renewTime/acquireTime or leaseDurationSeconds."""
        spec = lease.get("spec") or {}
        stamp = spec.get("renewTime") or spec.get("acquireTime")
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            renewed=times.parse(stamp) if stamp else None,
            duration=int(spec.get("leaseDurationSeconds") or 0),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def valid(self, now: datetime | None = None, duration: int | None = None) -> bool:
        """Still held: renewed less than its duration ago (`duration` stands in when the Lease has none)."""
        seconds = self.duration or duration or 0
        if self.renewed is None or seconds <= 0:
            return False
        return ((now or datetime.now(UTC)) - self.renewed).total_seconds() < seconds

    def remaining(self, now: datetime | None = None, duration: int | None = None) -> float:
        """Seconds the Lease stays valid from `now` (0 when it is not)."""
        seconds = self.duration or duration or 0
        if self.renewed is None or seconds <= 0:
            return 0.0
        left = seconds - ((now or datetime.now(UTC)) - self.renewed).total_seconds()
        return max(0.0, min(float(seconds), left))


def is_holder(lease: dict[str, Any], identity: str, now: datetime | None = None) -> bool:
    """HAMi's leadership test: the holder identity starts with ours and the Lease is still valid."""
    state = LeaseState.of(lease)
    return bool(identity) and state.holder.startswith(identity) and state.valid(now)


class Leadership:
    """A `threading.Event` whose set state also ends at a deadline (`time.monotonic()` seconds).

    `is_set()` is false once the deadline has passed, whatever the last poll said; `set()` without a
    deadline leads until `clear()` (a single replica, or tests)."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._event = threading.Event()
        self._until = float("inf")
        self._clock = clock

    def set(self, until: float | None = None) -> None:
        self._until = float("inf") if until is None else until
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set() and self._clock() < self._until

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout) and self.is_set()

    def expires_in(self) -> float:
        """Seconds left of the current term (0 when not leading)."""
        return max(0.0, self._until - self._clock()) if self._event.is_set() else 0.0


class LeaseWatcher(threading.Thread):
    """Polls `poll()` every `period` seconds until `stop`; `leading` follows its answer.

    `poll()` returns how many seconds this replica may lead from the moment the poll started (0: not
    leading). A malformed Lease counts as not leading. An API error (the API server restarting)
    changes nothing: a term keeps its deadline, the last read Lease's expiry, before which no other
    replica can take the Lease over; both are logged at `error_level`.
    """

    error_level = logging.WARNING

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        stop: threading.Event,
        identity: str = "",
        period: float = 2.0,
    ) -> None:
        super().__init__(name=f"lease-{name}", daemon=True)
        self.client, self.namespace, self.lease_name, self.stop_event = client, namespace, name, stop
        self.identity = identity or socket.gethostname()
        self.period = period
        self.leading = Leadership()
        self.terms = 0  # times `leading` was set: a term is one unbroken stretch of leading

    def path(self, named: bool = True) -> str:
        return lease_path(self.namespace, self.lease_name if named else None)

    def poll(self) -> float:
        raise NotImplementedError

    def step(self) -> bool:
        """One poll; flips `leading` (and logs) when the answer changed. Returns the answer."""
        started = time.monotonic()
        was_leading = self.leading.is_set()
        try:
            seconds: float | None = self.poll()
        except ApiError as exc:
            log.log(self.error_level, "lease %s/%s: %s", self.namespace, self.lease_name, exc)
            seconds = None
        except ValueError as exc:
            log.log(self.error_level, "lease %s/%s: %s", self.namespace, self.lease_name, exc)
            seconds = 0.0
        leading = self.leading.is_set() if seconds is None else seconds > 0
        if seconds:
            self.leading.set(until=started + seconds)
        if leading != was_leading:
            log.info(
                "leadership %s",
                "acquired" if leading else "lost",
                extra={"lease": f"{self.namespace}/{self.lease_name}", "identity": self.identity},
            )
            if leading:
                self.terms += 1
        if not leading:
            self.leading.clear()
        return leading

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.step()
            self.stop_event.wait(self.period)


class LeaseFollower(LeaseWatcher):
    """Reads kube-scheduler's Lease; never writes it (HAMi's leadership)."""

    error_level = logging.DEBUG  # kube-scheduler may not have created its Lease yet

    def poll(self) -> float:
        lease = self.client.request("GET", self.path(), limited=False).json()
        state = LeaseState.of(lease)
        if not (self.identity and state.holder.startswith(self.identity)):
            return 0.0
        return state.remaining()


class LeaseElector(LeaseWatcher):
    """Holds its own Lease (acquire, renew, take over once expired), as client-go's leader election."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        stop: threading.Event,
        identity: str = "",
        duration: int = 15,
        period: float = 2.0,
    ) -> None:
        super().__init__(client, namespace, name, stop, identity, period)
        self.duration = duration

    def poll(self) -> float:
        return float(self.duration) if self.try_acquire() else 0.0

    def try_acquire(self) -> bool:
        """One round: True while this identity holds the Lease after it. A lost race is False, not an error."""
        stamp = times.now_micro()
        try:
            lease = self.client.request("GET", self.path(), limited=False).json()
        except NotFound:
            return self._write("POST", self.path(named=False), self._new(stamp))
        state = LeaseState.of(lease)
        if state.holder != self.identity and state.valid(duration=self.duration):
            return False
        spec = lease.setdefault("spec", {})
        if state.holder != self.identity:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = state.transitions + 1
        spec.update(holderIdentity=self.identity, renewTime=stamp, leaseDurationSeconds=self.duration)
        return self._write("PUT", self.path(), lease)

    def _new(self, stamp: str) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.lease_name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self.duration,
                "acquireTime": stamp,
                "renewTime": stamp,
            },
        }

    def _write(self, method: str, path: str, lease: dict[str, Any]) -> bool:
        try:
            self.client.request(method, path, body=orjson.dumps(lease), limited=False)
            return True
        except ApiError as exc:
            log.debug("lease %s/%s: %s lost: %s", self.namespace, self.lease_name, method, exc)
            return False

"""Kubernetes Events, posted as HAMi's recorder (client-go's) posts them, and none lost on the way.

Filter and Bind only hand an event to a bounded queue; background posters correlate and post it,
following client-go's `tools/record` (EventCorrelator, events_cache.go):
- an identical event (same pod, type, reason and message) is one Event whose `count` grows: still
  queued, it is coalesced in memory; already posted, its Event is PATCHed (`count`, `lastTimestamp`;
  a 404 creates it again), from an LRU of the last 4,096 posted;
- a pod's 10th distinct message for the same type and reason within 10 minutes is posted as one
  "(combined from similar events): <message>" Event, and later ones bump its count;
- client-go's EventSourceObjectSpamFilter: a token bucket per source and pod and event type (25
  events, then one per 5 minutes) stops the writes about a pod that keeps failing (kube-scheduler
  retries an unschedulable pod every few seconds); a filtered event still counts into its Event's
  `count`, which the next write carries, and is counted in `hami_fast_events_total{result="filtered"}`;
- 429, 5xx and no answer are retried: every poster pauses (0.2 s doubling to 20 s, with jitter, or
  the answer's Retry-After, at most 60 s) and each event gets up to 12 tries (client-go's
  maxTriesPerEvent, about two minutes of outage).
An event is dropped only when that cannot hold: the queue is full (bounded memory), its tries ran
out (API unreachable for long), the API server rejected it (4xx other than AlreadyExists), or the
process stopped first. Each drop is counted (`hami_fast_events_dropped_total{reason}`) and logged in
one line per reason per minute.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from hami_fast.kube.client import MERGE_PATCH, KubeClient, TokenBucket, path_of
from hami_fast.kube.errors import AlreadyExists, NotFound, ServerError, TooManyRequests, Unreachable

log = logging.getLogger("hami_fast.events")

MAX_TRIES = 12  # client-go's maxTriesPerEvent
LRU_ENTRIES = 4096  # client-go's maxLruCacheEntries
AGGREGATE_MAX_EVENTS = 10  # client-go's defaultAggregateMaxEvents
AGGREGATE_INTERVAL_NS = 600 * 1_000_000_000  # client-go's defaultAggregateIntervalInSeconds
SPAM_BURST = 25  # client-go's defaultSpamBurst
SPAM_QPS = 1.0 / 300.0  # client-go's defaultSpamQPS: one event every 5 minutes once the burst is spent
MAX_RETRY_AFTER = 60.0  # the longest Retry-After honoured
COMBINED = "(combined from similar events): "
MESSAGE_LIMIT = 1024
DROP_LOG_EVERY = 60.0

_stamp: tuple[int, str] = (0, "")


def _stamp_of(second: int) -> str:
    global _stamp
    if _stamp[0] != second:
        _stamp = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return _stamp[1]


def event_body(
    namespace: str,
    name: str,
    uid: str,
    event_type: str,
    reason: str,
    message: str,
    component: str,
    at_ns: int | None = None,
    *,
    count: int = 1,
    first_ns: int | None = None,
    event_name: str = "",
    resource_version: str = "",
) -> bytes:
    """A core/v1 Event about a pod; `at_ns` (time.time_ns() when it happened) stamps it, and names it
    unless `event_name` is given; `first_ns` is the first occurrence of a `count` greater than 1;
    `resource_version` is the pod's, in the reference as client-go's GetReference makes it."""
    at_ns = time.time_ns() if at_ns is None else at_ns
    first_ns = at_ns if first_ns is None else first_ns
    involved = {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name, "uid": uid}
    if resource_version:
        involved["resourceVersion"] = resource_version
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name or f"{name}.{first_ns:x}", "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message[:MESSAGE_LIMIT],
            "type": event_type,
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": _stamp_of(first_ns // 1_000_000_000),
            "lastTimestamp": _stamp_of(at_ns // 1_000_000_000),
            "count": count,
        }
    )


def count_patch(count: int, last_ns: int, message: str) -> bytes:
    return orjson.dumps(
        {"count": count, "lastTimestamp": _stamp_of(last_ns // 1_000_000_000), "message": message[:MESSAGE_LIMIT]}
    )


class EventApi(Protocol):
    """Where Events go: the API server (`KubeEventApi`) or memory (`MemoryEvents`)."""

    def create(self, namespace: str, body: bytes) -> None:
        """Raises errors.AlreadyExists when the name is taken."""

    def patch(self, namespace: str, name: str, body: bytes) -> None:
        """A merge patch of an Event; raises errors.NotFound when it is gone."""


# namespace, pod name, pod uid, type, reason, message, component
Key = tuple[str, str, str, str, str, str, str]


@dataclass(slots=True)
class Occurrence:
    """One event as queued: `count` identical occurrences from `first_ns` to `last_ns`."""

    key: Key
    count: int
    first_ns: int
    last_ns: int
    resource_version: str = ""  # the pod's at the first occurrence (not part of any key, as in client-go)
    tries: int = 0
    not_before: float = 0.0  # monotonic time before which no poster takes it
    spam_checked: bool = False  # passed the spam filter (a retry does not spend a token again)


@dataclass(slots=True)
class Posted:
    name: str
    count: int
    first_ns: int
    written: bool = True  # False: only filtered occurrences so far, the Event is to be created


class SpamFilter:
    """client-go's EventSourceObjectSpamFilter: a token bucket (`burst`, refilled at `qps` per second)
    per key, in an LRU of `lru_entries` keys. `allow` spends a token per occurrence it lets through."""

    def __init__(
        self,
        burst: int = SPAM_BURST,
        qps: float = SPAM_QPS,
        lru_entries: int = LRU_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst, self.qps, self.lru_entries, self.clock = max(1, burst), qps, lru_entries, clock
        self._buckets: OrderedDict[tuple[str, ...], tuple[float, float]] = OrderedDict()  # key -> (tokens, at)
        self._lock = threading.Lock()

    def allow(self, key: tuple[str, ...], occurrences: int = 1) -> bool:
        """Whether to write `occurrences` coalesced identical events: yes while a token is left (each
        of them spends one, as client-go's filter sees each), else they are filtered."""
        now = self.clock()
        with self._lock:
            tokens, at = self._buckets.pop(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + max(0.0, now - at) * self.qps)
            spent = min(occurrences, int(tokens))
            self._buckets[key] = (tokens - spent, now)
            while len(self._buckets) > self.lru_entries:
                self._buckets.popitem(last=False)
        return spent > 0


class Correlator:
    """client-go's EventAggregator and eventLogger."""

    def __init__(self, lru_entries: int = LRU_ENTRIES) -> None:
        self.lru_entries = lru_entries
        self._similar: OrderedDict[tuple[str, ...], tuple[set[str], int]] = OrderedDict()
        self._posted: OrderedDict[tuple[str, ...], Posted] = OrderedDict()
        self._lock = threading.Lock()

    def aggregate(self, occurrence: Occurrence) -> tuple[tuple[str, ...], str, bool]:
        """The correlation key, the message to post and whether it is combined: the event's own, or the
        combined one once this pod has had AGGREGATE_MAX_EVENTS distinct messages for the type and
        reason within the interval."""
        namespace, name, uid, event_type, reason, message, component = occurrence.key
        similar = (namespace, name, uid, event_type, reason, component)
        with self._lock:
            messages, last = self._similar.pop(similar, (set(), 0))
            if occurrence.last_ns - last > AGGREGATE_INTERVAL_NS:
                messages = set()
            messages.add(message)
            self._similar[similar] = (messages, max(last, occurrence.last_ns))
            self._trim(self._similar)
            if len(messages) < AGGREGATE_MAX_EVENTS:
                return occurrence.key, message, False
            messages.pop()
            return similar, COMBINED + message, True

    def posted(self, key: tuple[str, ...]) -> Posted | None:
        with self._lock:
            return self._posted.get(key)

    def record(self, key: tuple[str, ...], posted: Posted) -> None:
        with self._lock:
            self._posted.pop(key, None)
            self._posted[key] = posted
            self._trim(self._posted)

    def _trim(self, cache: OrderedDict[Any, Any]) -> None:
        while len(cache) > self.lru_entries:
            cache.popitem(last=False)


RETRIED = (TooManyRequests, ServerError, Unreachable, OSError)


class EventSink:
    """A scheduling call only appends to an inbox (no lock, no object, no thread wake-up, no JSON
    encoding per Filter: all showed in the /filter profile). The posters wake every `interval`
    seconds, or at once when `wake_at` events wait, admit the inbox into the keyed queue (identical
    events coalesced) and post what has gathered."""

    def __init__(
        self,
        api: EventApi,
        capacity: int = 20_000,
        interval: float = 0.05,
        posters: int = 4,
        max_tries: int = MAX_TRIES,
        backoff: tuple[float, float] = (0.2, 20.0),
        spam_filter: SpamFilter | None = None,
        max_retry_after: float = MAX_RETRY_AFTER,
    ) -> None:
        self.api, self.capacity, self.interval, self.max_tries = api, max(1, capacity), interval, max(1, max_tries)
        self.backoff, self.max_retry_after = backoff, max_retry_after
        self.wake_at = max(1, min(256, self.capacity // 2))
        self.correlator = Correlator()
        self.spam_filter = SpamFilter() if spam_filter is None else spam_filter
        self._emitted = self._coalesced = 0
        self._posted: dict[str, int] = dict.fromkeys(("created", "updated", "aggregated", "retried", "filtered"), 0)
        self.dropped: dict[str, int] = dict.fromkeys(("queue_full", "retries_exhausted", "rejected", "shutdown"), 0)
        # emit appends to the inbox; posters admit it into the queue: in posting order, and by key
        # for coalescing (a plain dict: OrderedDict's insert costs 3x).
        self._inbox: deque[tuple[Key, int, str]] = deque()
        self._order: deque[Occurrence] = deque()
        self._queue: dict[Key, Occurrence] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._in_flight: set[tuple[str, ...]] = set()
        self._busy = 0
        self._failures = 0
        self._resume_at = 0.0
        self._drop_log: dict[str, tuple[float, int]] = {}  # reason -> (last line's time, drops since)
        self._random = random.Random()  # jitter without touching the global generator
        self._stopped = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, name=f"event-sink-{i}", daemon=True) for i in range(max(1, posters))
        ]
        for thread in self._threads:
            thread.start()

    # -- the scheduling side --------------------------------------------------------------------
    def emit(self, pod: dict[str, Any], event_type: str, reason: str, message: str, component: str) -> None:
        at = time.time_ns()
        namespace = pod.get("namespace") or "default"
        key = (
            namespace,
            pod.get("name", ""),
            pod.get("uid", ""),
            event_type,
            reason,
            message[:MESSAGE_LIMIT],
            component,
        )
        inbox = self._inbox
        if len(inbox) + len(self._queue) < self.capacity:
            inbox.append((key, at, pod.get("resourceVersion") or ""))  # atomic: no lock, no object
            if len(inbox) >= self.wake_at and not self._wake.is_set():
                self._wake.set()
            return
        with self._lock:  # full: only an event identical to a queued one still gets in (counted into it)
            self._admit()
            held = self._queue.get(key)
            if held is not None:
                self._coalesce(held, at)
                return
        self._dropped("queue_full", 1, f"the queue holds {self.capacity} events (--event-queue-size)")

    def _admit(self) -> None:
        """Move what emit appended into the keyed queue, coalescing identical events (lock held)."""
        inbox, queue = self._inbox, self._queue
        while inbox:
            key, at, resource_version = inbox.popleft()
            held = queue.get(key)
            if held is not None:
                self._coalesce(held, at)
            else:
                queue[key] = occurrence = Occurrence(key, 1, at, at, resource_version)
                self._order.append(occurrence)
            self._emitted += 1

    def _coalesce(self, held: Occurrence, at: int) -> None:
        held.count += 1
        held.last_ns = max(held.last_ns, at)
        self._coalesced += 1

    @property
    def counts(self) -> dict[str, int]:
        """accepted (into the queue), coalesced (into a queued identical one), created, updated (count
        patched), aggregated (posted as combined), retried (post attempts), filtered (occurrences the
        spam filter kept from a write)."""
        return {"accepted": self._emitted, "coalesced": self._coalesced, **self._posted}

    @property
    def queued(self) -> int:
        return len(self._inbox) + len(self._queue)

    # -- the posters ----------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            with self._lock:
                self._busy += 1
            try:
                self._drain()
            except Exception:  # a bug must not stop the posters
                log.exception("event poster failed")
            finally:
                with self._lock:
                    self._busy -= 1

    def _take(self) -> Occurrence | None:
        with self._lock:
            self._admit()
            now = time.monotonic()
            if now < self._resume_at or not self._order:
                return None
            occurrence = self._order.popleft()
            if occurrence.not_before > now:
                self._order.append(occurrence)
                return None
            del self._queue[occurrence.key]
            return occurrence

    def _drain(self) -> None:
        while (occurrence := self._take()) is not None:
            key, message, combined = self.correlator.aggregate(occurrence)
            with self._lock:
                clash = key in self._in_flight
                if not clash:
                    self._in_flight.add(key)
            if clash:  # another poster is writing this Event: bump its count after that write
                self._requeue(occurrence, self.interval)
                continue
            try:
                if self._spam_passed(occurrence):
                    self._post(occurrence, key, message, combined)
                else:
                    self._filtered(occurrence, key)
            finally:
                with self._lock:
                    self._in_flight.discard(key)

    def _spam_passed(self, occurrence: Occurrence) -> bool:
        if not occurrence.spam_checked:
            namespace, name, uid, event_type, _, _, component = occurrence.key
            spam_key = (component, namespace, name, uid, event_type)  # client-go's getSpamKey, for a pod
            occurrence.spam_checked = self.spam_filter.allow(spam_key, occurrence.count)
        return occurrence.spam_checked

    def _filtered(self, occurrence: Occurrence, key: tuple[str, ...]) -> None:
        """Not written, still observed (client-go's eventLogger counts it before the filter): the next
        write of this Event carries its count."""
        prior = self.correlator.posted(key)
        if prior is not None:
            posted = Posted(prior.name, prior.count + occurrence.count, prior.first_ns, prior.written)
        else:
            name = f"{occurrence.key[1]}.{occurrence.first_ns:x}"
            posted = Posted(name, occurrence.count, occurrence.first_ns, written=False)
        self.correlator.record(key, posted)
        with self._lock:
            self._posted["filtered"] += occurrence.count

    def _post(self, occurrence: Occurrence, key: tuple[str, ...], message: str, combined: bool) -> None:
        try:
            self._write(occurrence, key, message)
        except RETRIED as exc:
            self._retry(occurrence, exc)
            return
        except Exception as exc:  # 4xx: client-go does not retry these either
            self._dropped("rejected", occurrence.count, f"{occurrence.key[0]}/{occurrence.key[1]} {exc}")
            return
        with self._lock:
            self._failures = 0
            self._posted["aggregated"] += combined

    def _write(self, occurrence: Occurrence, key: tuple[str, ...], message: str) -> None:
        namespace, name, uid, event_type, reason, _, component = occurrence.key
        prior = self.correlator.posted(key)
        if prior is not None and prior.written:
            count = prior.count + occurrence.count
            try:
                self.api.patch(namespace, prior.name, count_patch(count, occurrence.last_ns, message))
                self.correlator.record(key, Posted(prior.name, count, prior.first_ns))
                self._count("updated")
                return
            except NotFound:  # the Event expired (kube-apiserver's --event-ttl): create it again
                pass
            event_name, first_ns = prior.name, prior.first_ns
        elif prior is not None:  # only filtered until now: create it with their count
            count, event_name, first_ns = prior.count + occurrence.count, prior.name, prior.first_ns
        else:
            count, event_name, first_ns = occurrence.count, f"{name}.{occurrence.first_ns:x}", occurrence.first_ns
        body = event_body(
            namespace,
            name,
            uid,
            event_type,
            reason,
            message,
            component,
            occurrence.last_ns,
            count=count,
            first_ns=first_ns,
            event_name=event_name,
            resource_version=occurrence.resource_version,
        )
        try:
            self.api.create(namespace, body)
        except AlreadyExists:  # posted before, its answer lost: it is recorded
            pass
        self.correlator.record(key, Posted(event_name, count, first_ns))
        self._count("created")

    def _retry(self, occurrence: Occurrence, exc: Exception) -> None:
        occurrence.tries += 1
        if occurrence.tries >= self.max_tries:
            self._dropped(
                "retries_exhausted",
                occurrence.count,
                f"{occurrence.key[0]}/{occurrence.key[1]} {occurrence.key[4]} after {occurrence.tries} tries: {exc}",
            )
            return
        with self._lock:
            self._posted["retried"] += 1
            self._failures += 1
            low, high = self.backoff
            pause = min(high, low * 2 ** (self._failures - 1)) * (0.5 + self._random.random() / 2)
            retry_after = getattr(exc, "retry_after", None)
            if retry_after is not None:  # the server said when: wait that long, within reason
                pause = max(low, min(retry_after, self.max_retry_after))
            self._resume_at = max(self._resume_at, time.monotonic() + pause)
        log.debug("event not posted, retrying in %.1f s: %s", pause, exc)
        self._requeue(occurrence, 0.0)

    def _requeue(self, occurrence: Occurrence, delay: float) -> None:
        """Back into the queue (past its capacity if need be: it was accepted), merged with an
        identical event queued meanwhile."""
        with self._lock:
            held = self._queue.get(occurrence.key)
            if held is not None:
                held.count += occurrence.count
                held.first_ns = min(held.first_ns, occurrence.first_ns)
                held.last_ns = max(held.last_ns, occurrence.last_ns)
                held.tries = max(held.tries, occurrence.tries)
                held.spam_checked = held.spam_checked or occurrence.spam_checked
                held.resource_version = occurrence.resource_version or held.resource_version
                return
            occurrence.not_before = time.monotonic() + delay
            self._queue[occurrence.key] = occurrence
            self._order.append(occurrence)

    def _count(self, what: str) -> None:
        with self._lock:
            self._posted[what] += 1

    def _dropped(self, reason: str, events: int, detail: str) -> None:
        """Count the drop; log one line per reason per DROP_LOG_EVERY seconds with the drops since."""
        now = time.monotonic()
        with self._lock:
            self.dropped[reason] += events
            last, since = self._drop_log.get(reason, (float("-inf"), 0))
            since += events
            speak = now - last >= DROP_LOG_EVERY
            self._drop_log[reason] = (now, 0) if speak else (last, since)
        if speak:
            log.warning(
                "%d event(s) dropped (%s): %s; hami_fast_events_dropped_total{reason=%r} counts every drop",
                since,
                reason,
                detail,
                reason,
            )

    # -- stopping -------------------------------------------------------------------------------
    def flush(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        self._wake.set()
        while (self.queued or self._busy) and time.monotonic() < deadline:
            self._wake.set()
            time.sleep(0.01)
        return not self.queued and not self._busy

    def close(self, timeout: float = 3.0) -> None:
        """Post what is queued, for up to `timeout` seconds, and stop the posters; what is left is
        counted and logged."""
        posted = self.flush(timeout)
        self._stopped.set()
        self._wake.set()
        if posted:
            return
        with self._lock:
            self._admit()
            left = sum(o.count for o in self._queue.values())
            self._queue.clear()
            self._order.clear()
        if left:
            self._dropped("shutdown", left, f"still queued after {timeout:g} s at shutdown")


class KubeEventApi:
    """Events spend their own budget (same QPS/burst), so they never slow a filter or a bind."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.bucket = TokenBucket(client.bucket.qps, client.bucket.burst)

    def create(self, namespace: str, body: bytes) -> None:
        self.bucket.take()
        self.client.request("POST", path_of("api", "v1", "namespaces", namespace, "events"), body=body, limited=False)

    def patch(self, namespace: str, name: str, body: bytes) -> None:
        self.bucket.take()
        self.client.request(
            "PATCH",
            path_of("api", "v1", "namespaces", namespace, "events", name),
            body=body,
            content_type=MERGE_PATCH,
            limited=False,
        )


class MemoryEvents:
    """Keeps the last events in memory (snapshot and demo modes, and tests)."""

    def __init__(self, capacity: int = 1000) -> None:
        self.items: list[dict[str, Any]] = []
        self.capacity = capacity
        self._by_name: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def create(self, namespace: str, body: bytes) -> None:
        event = orjson.loads(body)
        name = (namespace, event["metadata"]["name"])
        with self._lock:
            if name in self._by_name:
                raise AlreadyExists(f"events {name[1]!r} already exists", reason="AlreadyExists")
            self.items.append(event)
            self._by_name[name] = event
            for old in self.items[: -self.capacity]:
                self._by_name.pop((old["metadata"]["namespace"], old["metadata"]["name"]), None)
            del self.items[: -self.capacity]

    def patch(self, namespace: str, name: str, body: bytes) -> None:
        with self._lock:
            event = self._by_name.get((namespace, name))
            if event is None:
                raise NotFound(f"events {name!r} not found")
            event.update(orjson.loads(body))

    __call__ = create

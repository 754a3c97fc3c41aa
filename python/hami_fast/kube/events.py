"""Kubernetes Events posted asynchronously from a bounded queue: filter and bind never wait on them."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson

from hami_fast.kube.client import KubeClient, TokenBucket, path_of
from hami_fast.kube.errors import Conflict

log = logging.getLogger("hami_fast.events")


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
) -> bytes:
    """A core/v1 Event about a pod; `at_ns` (time.time_ns() when it happened) names and stamps it."""
    at_ns = time.time_ns() if at_ns is None else at_ns
    now = _stamp_of(at_ns // 1_000_000_000)
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{at_ns:x}", "namespace": namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name, "uid": uid},
            "reason": reason,
            "message": message[:1024],
            "type": event_type,
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
    )


class EventSink:
    """Events leave from background threads: a scheduling call only appends to a bounded buffer
    (dropping the oldest event when full, never blocking, as client-go's broadcaster drops). The
    posters wake every `interval` seconds, or at once when the buffer is half full, and build and
    post what has gathered: no thread wake-up and no JSON encoding per Filter (both showed in the
    /filter profile). Several posters, so a burst of binds (two events per pod) does not outrun one
    thread's round trips."""

    def __init__(
        self, post: Callable[[str, bytes], None], capacity: int = 1000, interval: float = 0.05, posters: int = 4
    ) -> None:
        self.post, self.capacity, self.interval = post, capacity, interval
        self.pending: deque[tuple[str, str, str, str, str, str, str, int]] = deque()
        self.dropped = 0
        self.sent = 0
        self.failed = 0
        self._wake = threading.Event()
        self._count_lock = threading.Lock()
        self._busy = 0
        self._threads = [
            threading.Thread(target=self._run, name=f"event-sink-{i}", daemon=True) for i in range(max(1, posters))
        ]
        for thread in self._threads:
            thread.start()

    def emit(self, pod: dict[str, Any], event_type: str, reason: str, message: str, component: str) -> None:
        if len(self.pending) >= self.capacity:
            try:
                self.pending.popleft()
                self.dropped += 1
            except IndexError:
                pass
        namespace = pod.get("namespace") or "default"
        item = (namespace, pod.get("name", ""), pod.get("uid", ""), event_type, reason, message, component)
        self.pending.append((*item, time.time_ns()))
        if len(self.pending) * 2 >= self.capacity:
            self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            with self._count_lock:
                self._busy += 1
            try:
                self._drain()
            finally:
                with self._count_lock:
                    self._busy -= 1

    def _drain(self) -> None:
        while True:
            try:
                namespace, *fields = self.pending.popleft()
            except IndexError:
                return
            try:
                self.post(namespace, event_body(namespace, *fields))  # type: ignore[arg-type]
                with self._count_lock:
                    self.sent += 1
            except Exception as exc:  # events are best effort
                with self._count_lock:
                    self.failed += 1
                log.debug("event not posted: %s", exc)

    def flush(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        self._wake.set()
        while (self.pending or self._busy) and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self.pending and not self._busy


def kube_poster(client: KubeClient) -> Callable[[str, bytes], None]:
    """Events spend their own budget (same QPS/burst), so they never slow a filter or a bind."""
    bucket = TokenBucket(client.bucket.qps, client.bucket.burst)

    def post(namespace: str, body: bytes) -> None:
        bucket.take()
        try:
            client.request("POST", path_of("api", "v1", "namespaces", namespace, "events"), body=body, limited=False)
        except Conflict:  # the same event name posted twice (AlreadyExists) is already recorded
            pass

    return post


class MemoryEvents:
    """Keeps the last events in memory (snapshot and demo modes, and tests)."""

    def __init__(self, capacity: int = 1000) -> None:
        self.items: list[dict[str, Any]] = []
        self.capacity = capacity

    def __call__(self, namespace: str, body: bytes) -> None:
        self.items.append(orjson.loads(body))
        del self.items[: -self.capacity]

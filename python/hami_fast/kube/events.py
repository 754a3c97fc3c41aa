"""Kubernetes Events posted asynchronously from a bounded queue: filter and bind never wait on them."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from hami_fast.kube.client import KubeClient, TokenBucket, path_of
from hami_fast.kube.errors import Conflict

log = logging.getLogger("hami_fast.events")


_stamp: tuple[int, str] = (0, "")


def _now() -> str:
    global _stamp
    second = int(time.time())
    if _stamp[0] != second:
        _stamp = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return _stamp[1]


def event_body(
    namespace: str, name: str, uid: str, event_type: str, reason: str, message: str, component: str
) -> bytes:
    now = _now()
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace},
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
    """Drops the oldest event when full rather than blocking a scheduling call (as client-go's
    broadcaster drops when its queue is full). Several posters, so a burst of binds (two events per
    pod) does not outrun one thread's round trips and lose events."""

    def __init__(self, post: Callable[[str, bytes], None], capacity: int = 1000, posters: int = 4) -> None:
        self.post = post
        self.queue: queue.Queue[tuple[str, bytes]] = queue.Queue(capacity)
        self.dropped = 0
        self.sent = 0
        self.failed = 0
        self._threads = [
            threading.Thread(target=self._run, name=f"event-sink-{i}", daemon=True) for i in range(max(1, posters))
        ]
        for thread in self._threads:
            thread.start()

    def emit(self, pod: dict[str, Any], event_type: str, reason: str, message: str, component: str) -> None:
        namespace = pod.get("namespace") or "default"
        body = event_body(namespace, pod.get("name", ""), pod.get("uid", ""), event_type, reason, message, component)
        while True:
            try:
                self.queue.put_nowait((namespace, body))
                return
            except queue.Full:
                try:
                    self.queue.get_nowait()
                    self.dropped += 1
                except queue.Empty:
                    pass

    def _run(self) -> None:
        while True:
            namespace, body = self.queue.get()
            try:
                self.post(namespace, body)
                self.sent += 1
            except Exception as exc:  # events are best effort
                self.failed += 1
                log.debug("event not posted: %s", exc)

    def flush(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while not self.queue.empty() and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.queue.empty()


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

"""The controller's work queue: placement keys to reconcile, each queued at most once."""

from __future__ import annotations

import heapq
import threading
import time


class WorkQueue:
    """Placement keys to reconcile, each queued at most once; `add_after` for backoffs and deadlines."""

    def __init__(self) -> None:
        self._ready: dict[str, None] = {}
        self._later: list[tuple[float, str]] = []
        self._due: dict[str, float] = {}  # the earliest pending `add_after` per key (older heap entries are stale)
        self._cond = threading.Condition()

    def add(self, key: str) -> None:
        with self._cond:
            self._ready[key] = None
            self._cond.notify()

    def add_after(self, key: str, delay: float) -> None:
        due = time.monotonic() + max(0.0, delay)
        with self._cond:
            if key in self._due and self._due[key] <= due:
                return
            self._due[key] = due
            heapq.heappush(self._later, (due, key))
            self._cond.notify()

    def get(self, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                while self._later and self._later[0][0] <= now:
                    due, key = heapq.heappop(self._later)
                    if self._due.get(key) == due:
                        del self._due[key]
                        self._ready[key] = None
                if self._ready:
                    key = next(iter(self._ready))
                    del self._ready[key]
                    return key
                wait = deadline - now
                if self._later:
                    wait = min(wait, self._later[0][0] - now)
                if deadline <= now:
                    return None
                self._cond.wait(max(wait, 0.001))

    def __len__(self) -> int:
        return len(self._ready)

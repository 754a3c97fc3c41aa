"""Binds wait their turn for a node's lock instead of failing back to kube-scheduler.

HAMi fails a Bind whose node lock (`hami.io/mutex.lock`) is held, and kube-scheduler then parks the
pod in its backoff queue for seconds to minutes (HAMi #1367, #1832). Here each node has a queue of
binds in arrival order. Only the head of a node's queue tries the lock, with the same protocol and
values as HAMi; when the lock is held the node is parked until the reflector reports a change to
that node (the device plugin releasing the lock) or a fallback timer fires. A bind still waiting
at its deadline fails with HAMi's own contention error, so kube-scheduler's httpTimeout is never
reached: keep `--bind-wait-timeout` below it (the chart derives it from `extenderHTTPTimeout`).

No HTTP handler thread is held while a bind waits: callers get a Future, and a small pool of
workers runs the attempts.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from hami_fast.kube.nodelock import LockContention

log = logging.getLogger("hami_fast.bindqueue")


@dataclass
class BindJob:
    """One pending bind: `attempt` raises LockContention while another pod holds the node's lock;
    `give_up` turns the last contention into the answer once the deadline has passed."""

    node: str
    attempt: Callable[[], bytes]
    give_up: Callable[[LockContention], bytes]
    deadline: float
    future: Future = field(default_factory=Future)
    enqueued: float = field(default_factory=time.monotonic)
    attempts: int = 0
    committed: bool = False  # an attempt is taking the lock or binding: let it finish
    abandoned: bool = False  # answered at its deadline before it could start: never attempt it

    @classmethod
    def within(
        cls, node: str, attempt: Callable[[], bytes], give_up: Callable[[LockContention], bytes], wait: float
    ) -> BindJob:
        return cls(node, attempt, give_up, time.monotonic() + max(0.0, wait))


@dataclass
class _NodeQueue:
    jobs: deque[BindJob] = field(default_factory=deque)
    state: str = "idle"  # idle | ready | running | parked
    changes: int = 0  # bumped by every watch event for the node; a change during an attempt re-runs it
    timer: int = 0  # token of the live fallback timer


class BindQueue:
    """`grace`: how long after its deadline a bind that never got a worker is answered anyway (with
    the contention error), so a saturated API client can never hold an answer past httpTimeout."""

    def __init__(
        self,
        workers: int = 16,
        recheck_interval: float = 2.0,
        on_done: Callable[[BindJob, float], None] | None = None,
        grace: float = 1.0,
    ) -> None:
        self.recheck_interval, self.grace = recheck_interval, grace
        self.on_done = on_done
        self._expiries: list[tuple[float, int, BindJob]] = []
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # workers wait here
        self._expiry_cond = threading.Condition(lock)  # the expiry thread waits here
        self._nodes: dict[str, _NodeQueue] = {}
        self._ready: deque[str] = deque()
        self._timers: list[tuple[float, int, str]] = []
        self._tokens = itertools.count(1)
        self._stopped = False
        self._threads = [
            threading.Thread(target=self._work, name=f"bind-{i}", daemon=True) for i in range(max(1, workers))
        ]
        self._threads.append(threading.Thread(target=self._expire, name="bind-expiry", daemon=True))
        for thread in self._threads:
            thread.start()

    # -- entry points ------------------------------------------------------------------------
    def submit(self, job: BindJob) -> Future:
        """Queue a bind behind the node's earlier ones; the Future resolves to the extender's answer."""
        node = job.node
        with self._cond:
            if self._stopped:
                raise RuntimeError("bind queue stopped")
            queue = self._nodes.setdefault(node, _NodeQueue())
            queue.jobs.append(job)
            heapq.heappush(self._expiries, (job.deadline + self.grace, next(self._tokens), job))
            if self._expiries[0][2] is job:
                self._expiry_cond.notify()
            if queue.state == "idle":
                self._make_ready(node, queue)
        return job.future

    def commit(self, job: BindJob) -> bool:
        """An attempt is about to take the lock: False if the job was already answered at its deadline."""
        with self._cond:
            if job.abandoned:
                return False
            job.committed = True
            return True

    def node_changed(self, node: str) -> None:
        """The node changed (its watch event shows no lock): a parked head re-tries the lock at once."""
        with self._cond:
            queue = self._nodes.get(node)
            if queue is None:
                return
            queue.changes += 1
            if queue.state == "parked":
                self._make_ready(node, queue)

    def waiting_on(self, node: str) -> bool:
        return node in self._nodes

    def depth(self) -> int:
        with self._cond:
            return sum(len(q.jobs) for q in self._nodes.values())

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            self._expiry_cond.notify_all()

    # -- workers -----------------------------------------------------------------------------
    def _make_ready(self, node: str, queue: _NodeQueue) -> None:
        queue.state = "ready"
        queue.timer = 0
        self._ready.append(node)
        self._cond.notify()

    def _next(self) -> tuple[str, BindJob, int] | None:
        with self._cond:
            while not self._stopped:
                now = time.monotonic()
                while self._timers and self._timers[0][0] <= now:
                    _, token, node = heapq.heappop(self._timers)
                    queue = self._nodes.get(node)
                    if queue is not None and queue.state == "parked" and queue.timer == token:
                        self._make_ready(node, queue)
                if self._ready:
                    node = self._ready.popleft()
                    queue = self._nodes[node]
                    while queue.jobs and queue.jobs[0].abandoned:
                        queue.jobs.popleft()
                    if not queue.jobs:
                        del self._nodes[node]
                        continue
                    queue.state = "running"
                    return node, queue.jobs[0], queue.changes
                self._cond.wait(self._timers[0][0] - now if self._timers else None)
            return None

    def _work(self) -> None:
        while (picked := self._next()) is not None:
            node, job, changes = picked
            job.attempts += 1
            answer: bytes | None = None
            contention: LockContention | None = None
            error: BaseException | None = None
            try:
                answer = job.attempt()
            except LockContention as exc:
                contention = exc
            except BaseException as exc:  # the attempt answers its own failures; this guards against a bug
                log.exception("bind attempt crashed", extra={"node": node})
                error = exc
            if self._settle(node, job, changes, contention is not None):
                continue
            if job.future.done():  # answered at its deadline while this attempt backed out
                continue
            if contention is not None:
                try:
                    answer = job.give_up(contention)
                except BaseException as exc:
                    error = exc
            if self.on_done:
                self.on_done(job, time.monotonic() - job.enqueued)
            if error is None:
                job.future.set_result(answer)
            else:
                job.future.set_exception(error)

    def _expire(self) -> None:
        """Answer every bind still unstarted shortly after its deadline."""
        while True:
            with self._cond:
                due: list[BindJob] = []
                while not self._stopped:
                    now = time.monotonic()
                    while self._expiries and self._expiries[0][0] <= now:
                        job = heapq.heappop(self._expiries)[2]
                        if job.deadline + self.grace > now:  # extended since (a PodGroup member)
                            heapq.heappush(self._expiries, (job.deadline + self.grace, next(self._tokens), job))
                        elif not job.future.done() and not job.committed:
                            job.abandoned = True
                            due.append(job)
                    if due:
                        break
                    self._expiry_cond.wait(self._expiries[0][0] - now if self._expiries else None)
                if self._stopped:
                    return
            for job in due:
                message = f"node {job.node}: bind still queued at its deadline ({job.attempts} attempts)"
                try:
                    job.future.set_result(job.give_up(LockContention(message)))
                except BaseException as exc:
                    if not job.future.done():
                        job.future.set_exception(exc)
                if self.on_done:
                    self.on_done(job, time.monotonic() - job.enqueued)

    def _settle(self, node: str, job: BindJob, changes: int, contended: bool) -> bool:
        """After an attempt: park or re-run the node's head (True), or take it off the queue (False)."""
        now = time.monotonic()
        with self._cond:
            queue = self._nodes[node]
            job.committed = False
            if contended and now < job.deadline and not job.abandoned:
                if queue.changes != changes:  # the node changed while we looked: look again
                    self._make_ready(node, queue)
                else:
                    queue.state = "parked"
                    queue.timer = next(self._tokens)
                    wake = min(job.deadline, now + self.recheck_interval)
                    heapq.heappush(self._timers, (wake, queue.timer, node))
                    self._cond.notify()
                return True
            queue.jobs.popleft()
            if queue.jobs:
                self._make_ready(node, queue)
            else:
                del self._nodes[node]
            return False

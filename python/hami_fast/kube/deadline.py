"""A deadline for the API calls one thread makes on behalf of a caller who stops waiting.

kube-scheduler waits `httpTimeout` for a Bind, then gives the pod up and schedules it again. The
Bind's writes (node lock, pod patch, binding) are retried on 429, 5xx and lost answers; without a
deadline those retries, each with the client's full request timeout, could outlast that wait and
bind a pod kube-scheduler has already moved on from. Inside `answer_by(t)` every request's timeout
is cut to the time left, and a retry that could not finish before `t` is not started: the caller
gets the last failure in time to answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_DEADLINE: ContextVar[float | None] = ContextVar("hami_fast_api_deadline", default=None)
# A request left less time than this is not sent: it could not be answered in time anyway.
MIN_REQUEST_TIME = 0.05


@contextmanager
def answer_by(deadline: float) -> Iterator[None]:
    """API calls of this thread inside the block end by `deadline` (time.monotonic())."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def time_left() -> float | None:
    """Seconds until the deadline (never below 0), or None outside `answer_by`."""
    deadline = _DEADLINE.get()
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def request_timeout(default: float) -> float:
    """`default`, cut to the time left."""
    left = time_left()
    return default if left is None else min(default, left)


def room_for(wait: float) -> bool:
    """Whether a retry after `wait` seconds still has time to be answered."""
    left = time_left()
    return left is None or wait + MIN_REQUEST_TIME < left

"""Writes retried when the API server is briefly unable to answer, as client-go's rest client retries.

A write that met no answer, a 429 or a 5xx is tried again after a backoff (0.1 s doubling, with
jitter) or the answer's Retry-After (at most `cap`), up to `tries` times in all. Any other answer,
and the last failure, is the caller's to handle. Retries are counted in `RETRIES` (by status).
Inside `deadline.answer_by`, a retry that could not be answered before the deadline is not made.
"""

from __future__ import annotations

import collections
import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from hami_fast.kube import deadline
from hami_fast.kube.errors import ApiError

log = logging.getLogger("hami_fast.retry")

T = TypeVar("T")
RETRIED_STATUSES = frozenset({0, 429, 500, 502, 503, 504})
RETRIES: collections.Counter[int] = collections.Counter()


def retried(
    call: Callable[[], T],
    what: str,
    *,
    tries: int = 4,
    base: float = 0.1,
    cap: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    delay = base
    for attempt in range(1, tries + 1):
        try:
            return call()
        except ApiError as exc:
            if exc.status not in RETRIED_STATUSES or attempt == tries:
                raise
            wait = min(cap, exc.retry_after) if exc.retry_after else delay * (1 + random.random() / 2)
            if not deadline.room_for(wait):
                log.warning("%s: %s; not retried: its caller's deadline comes first", what, exc)
                raise
            RETRIES[exc.status] += 1
            log.warning("%s: %s; try %d of %d in %.2f s", what, exc, attempt + 1, tries, wait)
            sleep(wait)
            delay = min(cap, delay * 2)
    raise AssertionError("unreachable")  # the loop returns or raises

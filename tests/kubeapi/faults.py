"""Request log and fault injection.

Matching rules take a *verb* and a *path* pattern:

* verb: ``None``/``"*"`` for any; an UPPERCASE HTTP method (``"PATCH"``, ``"GET"``); or a
  lowercase Kubernetes verb (``"get"``, ``"list"``, ``"watch"``, ``"create"``, ``"update"``,
  ``"patch"``, ``"delete"``). Binding and eviction are ``create`` on their subresource path.
* path: an ``fnmatch`` glob over the URL path without the query (``"/api/v1/nodes/*"``), or a
  compiled regular expression (``re.search``).
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import threading
import time
from collections import Counter, deque
from collections.abc import Callable  # Pattern: a compiled re
from dataclasses import dataclass
from re import Pattern
from typing import Any


@dataclass
class RequestRecord:
    seq: int
    time: float
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    verb: str = ""  # Kubernetes verb, "" for non-resource paths
    resource: str = ""  # e.g. "pods", "pods/binding", "leases.coordination.k8s.io"
    namespace: str | None = None
    name: str | None = None
    status: int | None = None  # the HTTP status answered (200 for watches that started)
    duration: float | None = None  # seconds from receipt to the end of the answer (or of the watch)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def __repr__(self) -> str:
        return f"<{self.method} {self.path} verb={self.verb} status={self.status}>"


def _match(verb: str | None, pattern: str | Pattern | None, rec: RequestRecord) -> bool:
    if verb not in (None, "*"):
        if verb.isupper():
            if rec.method != verb:
                return False
        elif rec.verb != verb:
            return False
    if pattern in (None, "*"):
        return True
    if isinstance(pattern, str):
        return fnmatch.fnmatchcase(rec.path, pattern)
    return pattern.search(rec.path) is not None


@dataclass
class Rule:
    verb: str | None
    path: str | Pattern | None
    status: int | None = None  # answer with this error code...
    reason: str | None = None
    message: str | None = None
    delay: float = 0.0  # ...and/or sleep this long first
    times: int | None = 1  # remaining uses; None = forever
    after: bool = False  # perform the request, then answer the error (a lost response)
    retry_after: int | None = None  # Retry-After header (seconds) on the error
    hits: int = 0

    def matches(self, rec: RequestRecord) -> bool:
        return (self.times is None or self.times > 0) and _match(self.verb, self.path, rec)


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class Faults:
    def __init__(self, wake: Callable[[], None] = lambda: None, log_size: int = 100_000):
        self._lock = threading.Lock()
        self._wake = wake
        self._rules: list[Rule] = []
        self._seq = itertools.count(1)
        self.requests: deque[RequestRecord] = deque(maxlen=log_size)
        self.counts: Counter[tuple[str, str]] = Counter()  # (METHOD, path) -> n, never truncated
        self._expire: list[list] = []  # [pattern, remaining, as_response]
        self._watches: set = set()
        self._stalled: list[str | Pattern | None] = []

    # -- request log ---------------------------------------------------------------------------

    def record(self, rec_kwargs: dict) -> RequestRecord:
        rec = RequestRecord(seq=next(self._seq), time=time.time(), **rec_kwargs)
        with self._lock:
            self.requests.append(rec)
            self.counts[(rec.method, rec.path)] += 1
        return rec

    def log(self, verb: str | None = None, path: str | Pattern | None = None) -> list[RequestRecord]:
        """Recorded requests matching verb and path (see the module docstring)."""
        with self._lock:
            return [r for r in self.requests if _match(verb, path, r)]

    def count(self, verb: str | None = None, path: str | Pattern | None = None) -> int:
        return len(self.log(verb, path))

    def clear_log(self) -> None:
        with self._lock:
            self.requests.clear()
            self.counts.clear()

    # -- injected errors and delays ------------------------------------------------------------

    def fail(
        self,
        verb: str | None,
        path: str | Pattern | None,
        status: int = 500,
        *,
        times: int | None = 1,
        reason: str | None = None,
        message: str | None = None,
        after: bool = False,
        delay: float = 0.0,
        retry_after: int | None = None,
    ) -> Rule:
        """Answer the next `times` matching requests with a Status error `status`. With
        after=True the request is carried out first and only the answer is an error."""
        rule = Rule(
            verb,
            path,
            status,
            reason or _REASONS.get(status, "InternalError"),
            message or f"injected fault: {status}",
            delay,
            times,
            after,
            retry_after,
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def delay(self, verb: str | None, path: str | Pattern | None, seconds: float, *, times: int | None = None) -> Rule:
        """Sleep `seconds` before handling matching requests (`times` of them; None = all)."""
        rule = Rule(verb, path, None, delay=seconds, times=times)
        with self._lock:
            self._rules.append(rule)
        return rule

    def take(self, rec: RequestRecord) -> list[Rule]:
        """Rules that apply to this request (each use is consumed)."""
        out = []
        with self._lock:
            for rule in self._rules:
                if rule.matches(rec):
                    if rule.times is not None:
                        rule.times -= 1
                    rule.hits += 1
                    out.append(rule)
        return out

    def clear(self) -> None:
        """Remove every rule, pending 410 and stall (the request log is kept)."""
        with self._lock:
            self._rules.clear()
            self._expire.clear()
            self._stalled.clear()
        self._wake()

    # -- watch faults --------------------------------------------------------------------------

    def expire_next_watch(
        self, path: str | Pattern | None = None, *, times: int = 1, as_response: bool = False
    ) -> None:
        """The next `times` watch requests (matching `path`) get 410: by default as an ERROR
        event in a 200 stream (what the watch cache does), or as a plain HTTP 410 response."""
        with self._lock:
            self._expire.append([path, times, as_response])

    def take_expire(self, rec: RequestRecord) -> tuple[bool, bool]:
        with self._lock:
            for item in self._expire:
                if item[1] > 0 and _match(None, item[0], rec):
                    item[1] -= 1
                    return True, item[2]
        return False, False

    def register_watch(self, w) -> None:
        with self._lock:
            self._watches.add(w)

    def unregister_watch(self, w) -> None:
        with self._lock:
            self._watches.discard(w)

    def active_watches(self, path: str | Pattern | None = None) -> list:
        with self._lock:
            return [w for w in self._watches if _match(None, path, w.record)]

    def drop_watches(self, path: str | Pattern | None = None, *, graceful: bool = False) -> int:
        """Cut open watch connections: abruptly (socket shut down mid-stream, the client sees a
        protocol error) or gracefully (the stream ends as if it timed out). Returns how many."""
        ws = self.active_watches(path)
        for w in ws:
            w.drop = "graceful" if graceful else "abrupt"
        self._wake()
        return len(ws)

    def stall_watches(self, path: str | Pattern | None = None) -> None:
        """Matching watches (open and future) stop sending anything, bookmarks included, while
        keeping the connection open: a silently hung watch. Undo with unstall_watches()."""
        with self._lock:
            self._stalled.append(path)

    def unstall_watches(self) -> None:
        with self._lock:
            self._stalled.clear()
        self._wake()

    def is_stalled(self, rec: RequestRecord) -> bool:
        with self._lock:
            return any(_match(None, p, rec) for p in self._stalled)

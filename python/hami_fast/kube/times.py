"""RFC 3339 timestamps as Kubernetes and HAMi write them, and their age.

- `now()`: `metav1.Time` (UTC, whole seconds, `Z`): status fields, placements, events.
- `now_micro()`: `metav1.MicroTime` (UTC, microseconds, `Z`): Lease `acquireTime`/`renewTime`.
- `now_local()`: Go's `time.Now().Format(time.RFC3339)` (local offset, `Z` in UTC): HAMi's node lock.
- `parse()`: any of those, or Go's `RFC3339Nano` (nanoseconds are cut to microseconds); a stamp
  without an offset is taken as UTC. Raises `ValueError` on anything else.
- `age_seconds()`: seconds since a stamp (negative for one in the future); `None` if unparsable.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_FRACTION = re.compile(r"(\.\d{6})\d+")


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_local() -> str:
    return datetime.now(UTC).astimezone().isoformat(timespec="seconds").replace("+00:00", "Z")


def parse(text: str) -> datetime:
    stamp = datetime.fromisoformat(_FRACTION.sub(r"\1", str(text).strip().upper()))
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def age_seconds(text: str, at: datetime | None = None) -> float | None:
    try:
        stamp = parse(text)
    except ValueError:
        return None
    return ((at or datetime.now(UTC)) - stamp).total_seconds()

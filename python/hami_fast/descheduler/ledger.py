"""The hour's moves of `--auto`, kept where neither a restart, a new leader nor a deleted placement
loses them: a small ConfigMap next to the descheduler's Lease (no new CRD).

`data.moves` is a JSON list of `{"reqID", "pod", "for", "at"}`, one entry per move started (the
placement's `spec.reqID`, the pod it moves, the pending pod it unblocks, when it started), oldest
first. Every write prunes it to the last hour and to at most `cap` entries (the newest), so its
size is bounded whatever the flags. Writes carry the read's resourceVersion: a lost race is read
again and retried, never overwritten.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson

from hami_fast.kube import times
from hami_fast.kube.client import KubeClient, path_of
from hami_fast.kube.errors import AlreadyExists, Conflict, NotFound

log = logging.getLogger("hami_fast.descheduler.ledger")

HOUR = 3600.0
KEY = "moves"
CAP = 512  # entries; ~100 bytes each, far below a ConfigMap's 1 MiB
MANAGED_BY = "app.kubernetes.io/managed-by"

Entry = dict[str, str]


class Full(Exception):
    """`record`'s `fits` said no to the record as read: nothing was written."""


def configmap_path(namespace: str, name: str | None = None) -> str:
    return path_of("api", "v1", "namespaces", namespace, "configmaps", *([name] if name else []))


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _age(entry: Entry, now: float) -> float | None:
    at = entry.get("at")
    return None if at is None else times.age_seconds(at, datetime.fromtimestamp(now, UTC))


def within_the_hour(entries: list[Entry], now: float) -> list[Entry]:
    """The entries started less than an hour before `now` (one with an unreadable stamp, which only
    a hand edit makes, is dropped)."""
    kept = []
    for entry in entries:
        age = _age(entry, now)
        if age is not None and age < HOUR:
            kept.append(entry)
    return kept


class MoveLedger:
    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        cap: int = CAP,
        manager: str = "hami-fast-descheduler-auto",
    ) -> None:
        self.client, self.namespace, self.name, self.cap, self.manager = client, namespace, name, cap, manager

    def __str__(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}"

    def _read(self) -> dict[str, Any] | None:
        try:
            return self.client.request("GET", configmap_path(self.namespace, self.name)).json()
        except NotFound:
            return None

    def _entries_of(self, configmap: dict[str, Any] | None) -> list[Entry]:
        text = ((configmap or {}).get("data") or {}).get(KEY) or "[]"
        try:
            entries = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            log.warning("%s: data.%s is not JSON (%s): read as empty, rewritten on the next move", self, KEY, exc)
            return []
        if not isinstance(entries, list):
            log.warning("%s: data.%s is not a list: read as empty, rewritten on the next move", self, KEY)
            return []
        return [e for e in entries if isinstance(e, dict) and isinstance(e.get("reqID"), str)]

    def entries(self, now: float) -> list[Entry]:
        """The moves started within the hour before `now`."""
        return within_the_hour(self._entries_of(self._read()), now)

    def record(self, entry: Entry, now: float, fits: Callable[[list[Entry]], bool] | None = None) -> None:
        """Adds a move that starts now (stamped `now` unless it says when). `fits` is asked about the
        hour's entries exactly as read before the write (which carries that read's resourceVersion):
        False raises `Full`, so two writers checking a cap cannot both pass it."""
        stamped = {**entry, "at": entry.get("at") or _stamp(now)}

        def add(entries: list[Entry]) -> list[Entry]:
            if fits is not None and not fits(entries):
                raise Full(f"{self} is full")
            return [e for e in entries if e["reqID"] != stamped["reqID"]] + [stamped]

        self._update(add, now)

    def forget(self, req_id: str, now: float) -> None:
        """Drops a move that never evicted (refused by a disruption budget, or never created)."""
        self._update(lambda entries: [e for e in entries if e["reqID"] != req_id], now)

    def _update(self, change: Callable[[list[Entry]], list[Entry]], now: float, attempts: int = 8) -> None:
        """Read, change, prune, write with the read's resourceVersion; retried on a lost race.
        Raises ApiError when the write cannot be made (the caller does not start the move)."""
        for attempt in range(attempts):
            configmap = self._read()
            entries = change(within_the_hour(self._entries_of(configmap), now))[-self.cap :]
            data = {KEY: orjson.dumps(entries).decode()}
            try:
                if configmap is None:
                    self.client.request("POST", configmap_path(self.namespace), body=orjson.dumps(self._new(data)))
                else:
                    configmap["data"] = {**(configmap.get("data") or {}), **data}
                    self.client.request("PUT", configmap_path(self.namespace, self.name), body=orjson.dumps(configmap))
                return
            except (Conflict, AlreadyExists):
                if attempt == attempts - 1:
                    raise

    def _new(self, data: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {MANAGED_BY: self.manager},
                "annotations": {
                    "hami-fast.io/description": "moves started by hami-fast descheduler --auto within the last hour "
                    "(--max-moves-per-hour counts them); pruned on every write"
                },
            },
            "data": data,
        }

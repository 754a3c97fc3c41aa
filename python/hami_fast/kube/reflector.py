"""List-then-watch per resource, raw bytes straight into a store (client-go's reflector, trimmed).

The store is the Rust cluster for the scheduler, or any object with the same three methods (the
descheduler keeps its placements and pods in a Python store, `descheduler/cache.py`)."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import urllib3

from hami_fast._native import EngineError
from hami_fast.kube.client import KubeClient
from hami_fast.kube.errors import ApiError, Gone, api_error

log = logging.getLogger("hami_fast.reflector")


class Store(Protocol):
    """What a reflector feeds (`_native.Cluster` is one)."""

    def apply_list_page(self, page: bytes) -> tuple[str, str, list[str], list[str]]: ...

    def apply_watch_event(self, line: bytes) -> tuple[str, str, str, int, str | None]: ...

    def retain(self, kind: str, keys: list[str]) -> int: ...


@dataclass
class Resource:
    kind: str
    path: str
    label_selector: str = ""
    field_selector: str = ""


NODES = Resource("Node", "/api/v1/nodes")
PODS = Resource("Pod", "/api/v1/pods")
QUOTAS = Resource("ResourceQuota", "/api/v1/resourcequotas")


@dataclass
class ReflectorStats:
    lists: int = 0
    watches: int = 0
    # Watches re-opened from the last resourceVersion after a dropped connection or a 429/5xx (no re-list).
    resumed: int = 0
    events: int = 0
    bad_objects: int = 0
    errors: int = 0
    last_error: str = ""
    resource_version: str = ""
    synced: threading.Event = field(default_factory=threading.Event)


class Reflector(threading.Thread):
    """Paged LIST, then WATCH with bookmarks from the list's resourceVersion; re-list on 410; backoff on errors.

    As client-go's reflector, a watch that breaks because the API server went away (connection
    refused or reset, 429, 5xx) is re-opened from the last resourceVersion it saw, with backoff: the
    cache is not listed again unless the server answers 410 (that version is gone) or another error."""

    def __init__(
        self,
        client: KubeClient,
        cluster: Store,
        resource: Resource,
        stop: threading.Event,
        *,
        page_size: int = 500,
        watch_seconds: int = 300,
        on_event: Callable[[str, bytes], None] | None = None,
    ) -> None:
        super().__init__(name=f"reflector-{resource.kind}", daemon=True)
        self.client, self.cluster, self.resource, self.stop_event = client, cluster, resource, stop
        self.page_size, self.watch_seconds = page_size, watch_seconds
        self.on_event = on_event  # called with the object's key and the raw event after each applied one
        self.stats = ReflectorStats()

    def run(self) -> None:
        backoff = 0.2
        while not self.stop_event.is_set():
            try:
                version = self.list()
                self.stats.synced.set()
                backoff = 0.2
                try:
                    self.watch(version)
                except Gone:  # only a watch's 410 re-lists at once; a LIST's 410 backs off like any error
                    log.info("watch expired, re-listing", extra={"kind": self.resource.kind})
            except (ApiError, EngineError, OSError, ValueError, urllib3.exceptions.HTTPError) as exc:
                if self.stop_event.is_set():
                    return  # stopping while a watch was open: its connection error is expected
                self.stats.errors += 1
                self.stats.last_error = str(exc)
                log.warning("reflector error: %s", exc, extra={"kind": self.resource.kind})
                self.stop_event.wait(backoff * (1 + random.random() / 2))
                backoff = min(backoff * 2, 30.0)
            except Exception as exc:  # a bug must not kill the cache silently
                self.stats.errors += 1
                self.stats.last_error = repr(exc)
                log.exception("reflector crashed, restarting", extra={"kind": self.resource.kind})
                self.stop_event.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _query(self) -> list[tuple[str, str]]:
        query = [("labelSelector", self.resource.label_selector)] if self.resource.label_selector else []
        return query + ([("fieldSelector", self.resource.field_selector)] if self.resource.field_selector else [])

    def list(self) -> str:
        keys: list[str] = []
        token, version = "", ""
        while True:
            query = [*self._query(), ("limit", str(self.page_size))] + ([("continue", token)] if token else [])
            try:
                page = self.client.request("GET", self.resource.path, query=query)
            except Gone:
                if not token:
                    raise
                keys, token = [], ""  # continue token expired mid-list: start over
                continue
            version, token, page_keys, errors = self.cluster.apply_list_page(page.data)
            keys.extend(page_keys)
            for error in errors:
                self.stats.bad_objects += 1
                log.warning("ignored object: %s", error, extra={"kind": self.resource.kind})
            if not token:
                break
        removed = self.cluster.retain(self.resource.kind, keys)
        self.stats.lists += 1
        self.stats.resource_version = version
        log.info(
            "listed %d objects (%d removed since last list)",
            len(keys),
            removed,
            extra={"kind": self.resource.kind, "resourceVersion": version},
        )
        return version

    def watch(self, version: str) -> None:
        backoff = 0.2
        while not self.stop_event.is_set():
            query = [
                *self._query(),
                ("watch", "1"),
                ("resourceVersion", version),
                ("allowWatchBookmarks", "true"),
                ("timeoutSeconds", str(self.watch_seconds)),
            ]
            self.stats.watches += 1
            try:
                for line in self.client.stream_lines(self.resource.path, query, read_timeout=self.watch_seconds + 30):
                    version = self._handle(line) or version
                    backoff = 0.2
                    if self.stop_event.is_set():
                        return
            except (ApiError, OSError, urllib3.exceptions.HTTPError) as exc:
                if self.stop_event.is_set() or not resumable(exc):
                    raise
                self.stats.resumed += 1
                self.stats.errors += 1
                self.stats.last_error = str(exc)
                log.warning(
                    "watch broken, resuming from resourceVersion %s: %s",
                    version,
                    exc,
                    extra={"kind": self.resource.kind},
                )
                self.stop_event.wait(backoff * (1 + random.random() / 2))
                backoff = min(backoff * 2, 30.0)

    def _handle(self, line: bytes) -> str:
        event_type, version, key, code, error = self.cluster.apply_watch_event(line)
        if event_type == "ERROR":  # a Status in the stream: 410 is Gone, as for an HTTP answer
            raise api_error(code, "WatchError", line[:300].decode(errors="replace"), "WATCH", self.resource.path)
        self.stats.events += 1
        self.stats.resource_version = version or self.stats.resource_version
        if error:
            self.stats.bad_objects += 1
            log.warning("ignored object: %s", error, extra={"kind": self.resource.kind, "key": key})
        elif self.on_event and key:
            self.on_event(key, line)
        return version


def resumable(exc: Exception) -> bool:
    """A broken watch worth re-opening from the same resourceVersion: no answer at all, 429 or 5xx."""
    if isinstance(exc, ApiError):
        return exc.status == 0 or exc.status == 429 or exc.status >= 500
    return True

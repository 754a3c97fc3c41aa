"""The descheduler's listeners and who may use each (docs/descheduler.md, "Access").

| flag | serves | access |
|---|---|---|
| `--bind` | the REST API, the GPU map, `/metrics` (and `/webhook` without `--webhook-bind`) | `--api-auth` (`auto`: none on loopback, else TokenReview + SubjectAccessReview); TLS with `--api-tls`, or when it also serves the webhook and certificates are given |
| `--webhook-bind` | `/webhook` (plus `/healthz`, `/readyz`) alone, for the API server | none (the API server calls it); TLS with `--cert-file`/`--key-file` |
| `--local-bind` | the same as `--bind`, loopback addresses only | none: only this host (in a pod: `kubectl port-forward`) reaches it |
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from granian.constants import Interfaces
from granian.server.embed import Server

from hami_fast.descheduler.access import OPEN_PATHS, attributes_in, auth_mode, is_loopback, require_loopback
from hami_fast.descheduler.config import DeschedulerConfig
from hami_fast.server.guard import Guarded
from hami_fast.server.listen import ListenError, probe, start_listening

log = logging.getLogger("hami_fast.descheduler")


@dataclass(frozen=True)
class Listener:
    address: str
    flag: str
    app: Any
    tls: bool


def api_tls(config: DeschedulerConfig) -> bool:
    certificates = bool(config.cert_file and config.key_file)
    return bool(config.api_tls) or (certificates and not config.webhook_bind)


def check(config: DeschedulerConfig) -> None:
    """ValueError / ListenError (one line each) for flags that cannot work, before anything starts."""
    auth_mode(config.api_auth, config.bind, bool(config.snapshot))
    if config.local_bind:
        require_loopback(config.local_bind, "--local-bind")
    if config.api_tls and not (config.cert_file and config.key_file):
        raise ValueError("--api-tls needs --cert-file and --key-file")
    seen: dict[str, str] = {}
    for address, flag in addresses(config):
        port = address.rpartition(":")[2]
        if port != "0" and port in seen:
            raise ValueError(f"{flag} {address}: port {port} is {seen[port]}'s already; each listener needs its own")
        seen[port] = flag
        probe(address, flag)


def addresses(config: DeschedulerConfig) -> list[tuple[str, str]]:
    named = [(config.bind, "--bind"), (config.webhook_bind, "--webhook-bind"), (config.local_bind, "--local-bind")]
    return [(address, flag) for address, flag in named if address]


def build(config: DeschedulerConfig, api: Any, webhook: Any, access: Any) -> list[Listener]:
    """The listeners to start; `access`: the KubeAccess guarding the API on --bind (None: open)."""
    hint = f"; without one (a browser): the loopback listener {config.local_bind}" if config.local_bind else ""
    guarded = guard(api, access, config.lease_namespace, hint) if access is not None else api
    found = [Listener(config.bind, "--bind", guarded, api_tls(config))]
    if config.webhook_bind:
        found.append(
            Listener(config.webhook_bind, "--webhook-bind", webhook, bool(config.cert_file and config.key_file))
        )
    if config.local_bind:
        found.append(Listener(config.local_bind, "--local-bind", api, False))
    return found


def guard(api: Any, access: Any, namespace: str, hint: str = "") -> Guarded:
    return Guarded(api, access, attributes_in(namespace), OPEN_PATHS, realm="hami-fast-descheduler", hint=hint)


def describe(config: DeschedulerConfig, guarded: bool) -> str:
    """The start-up line: where each listener is and who may use it."""
    scheme = "https" if api_tls(config) else "http"
    who = "bearer tokens checked with TokenReview and SubjectAccessReview" if guarded else "no authentication"
    parts = [f"descheduler API on {config.bind} ({scheme}, {who})"]
    if config.webhook_bind:
        parts.append(f"webhook on {config.webhook_bind}")
    if config.local_bind:
        parts.append(f"local API on {config.local_bind} (http, no authentication)")
    return ", ".join(parts)


def warn_if_open(config: DeschedulerConfig, guarded: bool) -> None:
    if not guarded and not is_loopback(config.bind):
        log.warning(
            "the descheduler API on %s answers anyone who reaches it (--api-auth=none): cluster info,"
            " every GPU pod, placements and plans",
            config.bind,
        )


def granian(listener: Listener, config: DeschedulerConfig) -> Server:
    host, _, port = listener.address.rpartition(":")
    ssl: dict[str, Any] = {"ssl_cert": Path(config.cert_file), "ssl_key": Path(config.key_file)} if listener.tls else {}
    return Server(
        listener.app,
        address=host.strip("[]") or "0.0.0.0",
        port=int(port),
        interface=Interfaces.RSGI,
        log_enabled=False,
        **ssl,
    )


async def serve_all(found: list[Listener], config: DeschedulerConfig, stop: threading.Event) -> list[Any]:
    """Start every listener (all or none: a busy port stops the ones started); the running pairs."""
    running: list[tuple[Server, asyncio.Task[None]]] = []
    try:
        for listener in found:
            server = granian(listener, config)
            running.append((server, await start_listening(server, listener.address, flag=listener.flag)))
    except ListenError:
        await stop_all(running)
        stop.set()
        raise
    return running


async def stop_all(running: list[Any]) -> None:
    for server, _ in running:
        server.stop()
    for _, task in running:
        await task

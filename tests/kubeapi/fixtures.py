"""pytest fixtures for the test Kubernetes API server.

Fixtures (registered in ``tests/conftest.py``):

``kubeapi``
    A started server on 127.0.0.1 (plain HTTP, ephemeral port) and a :class:`KubeAPI` handle:
    ``url``, ``kubeconfig`` (path of a kubeconfig with a bearer token), ``api_client`` (an
    official ``kubernetes.client.ApiClient`` built from that kubeconfig), ``core_v1`` & co., direct
    state helpers (``create``/``get``/``list``/``patch``/``delete``, no HTTP, not logged), the
    request log (``requests``/``count``) and fault controls (``fail``, ``delay``,
    ``expire_next_watch``, ``drop_watches``, ``stall_watches``, ``compact``...).
``kubeapi_tls``
    The same over HTTPS with a throwaway CA (``trustme``); ``ca_pem``/``ca_file`` on the handle.
``kubeapi_factory``
    ``kubeapi_factory(tls=False, **server_options)`` for more servers or non-default options
    (``token=``, ``history_size=``, ``bookmark_interval=``, ``watch_gone_as_response=``...).

Example::

    def test_bind(kubeapi):
        kubeapi.create(node("n1")); kubeapi.create(pod("p"))
        run_product(kubeconfig=kubeapi.kubeconfig)
        assert kubeapi.get("pods", "p", "default")["spec"]["nodeName"] == "n1"
        [patch] = kubeapi.requests("PATCH", "/api/v1/namespaces/default/pods/p")
        assert patch.content_type == "application/merge-patch+json"
"""

from __future__ import annotations

import copy
import gc
import os
import ssl
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from . import patch as patchlib
from . import selectors
from .faults import RequestRecord
from .server import KubeAPIServer
from .store import ApiError


class KubeAPI:
    """Handle on a running :class:`KubeAPIServer` plus an official client configured for it."""

    def __init__(self, server: KubeAPIServer, kubeconfig: str, ca_pem: bytes | None = None, ca_file: str | None = None):
        from kubernetes import config

        self.server = server
        self.url = server.url
        self.kubeconfig = kubeconfig
        self.ca_pem, self.ca_file = ca_pem, ca_file
        self.store, self.faults, self.registry = server.store, server.faults, server.registry
        self.access = server.access  # users by token, rules for SubjectAccessReview (access.py)
        self.api_client = config.new_client_from_config(config_file=kubeconfig, persist_config=False)
        self.configuration = self.api_client.configuration

    # -- typed API objects ---------------------------------------------------------------------

    @property
    def core_v1(self):
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    @property
    def coordination_v1(self):
        from kubernetes import client

        return client.CoordinationV1Api(self.api_client)

    @property
    def events_v1(self):
        from kubernetes import client

        return client.EventsV1Api(self.api_client)

    @property
    def policy_v1(self):
        from kubernetes import client

        return client.PolicyV1Api(self.api_client)

    @property
    def custom(self):
        from kubernetes import client

        return client.CustomObjectsApi(self.api_client)

    def close(self) -> None:
        self.api_client.close()

    # -- direct state access (no HTTP; not in the request log) ---------------------------------

    def create(self, obj: dict) -> dict:
        """Store an object as given (status, uid, creationTimestamp kept; resourceVersion
        assigned); watchers see ADDED. The type comes from apiVersion/kind."""
        return copy.deepcopy(self.store.seed(obj))

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict | None:
        """A copy of the stored object, or None. `resource`: `pods`, `Node`, `leases`, ..."""
        rt = self.registry.resolve(resource)
        try:
            return copy.deepcopy(self.store.get(rt, namespace, name))
        except ApiError:
            return None

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict]:
        rt = self.registry.resolve(resource)
        items, _, _, _ = self.store.list(rt, namespace, selectors.matcher(label_selector, field_selector))
        return copy.deepcopy(items)

    def update(
        self, resource: str, name: str, change: Callable[[dict], dict | None], namespace: str | None = None
    ) -> dict:
        """Read-modify-write bypassing API rules (status included); `change` may mutate in place."""
        rt = self.registry.resolve(resource)

        def fn(cur: dict) -> dict:
            out = change(cur)
            out = cur if out is None else out
            out.get("metadata", {}).pop("resourceVersion", None)
            return out

        return copy.deepcopy(self.store.update(rt, namespace, name, fn, raw=True))

    def patch(self, resource: str, name: str, merge_patch: dict, namespace: str | None = None) -> dict:
        """Apply a JSON merge patch to the whole object (status included)."""
        return self.update(resource, name, lambda cur: patchlib.merge_patch(cur, merge_patch), namespace)

    def delete(self, resource: str, name: str, namespace: str | None = None) -> None:
        """Delete at once (finalizers and grace periods ignored); watchers see DELETED."""
        rt = self.registry.resolve(resource)
        self.store.update(rt, namespace, name, lambda cur: _strip_for_delete(cur), raw=True)

    def events(self, namespace: str | None = None) -> list[dict]:
        """core/v1 and events.k8s.io/v1 Events in one normalised shape, oldest first:
        ``{"reason", "type", "message", "object": "<kind>/<ns>/<name>", "source", "raw"}``."""
        out = []
        for res in ("events", "events.events.k8s.io"):
            for ev in self.list(res, namespace):
                regarding = ev.get("involvedObject") or ev.get("regarding") or {}
                source = (
                    (ev.get("source") or {}).get("component")
                    or ev.get("reportingController")
                    or ev.get("reportingComponent")
                    or ""
                )
                out.append(
                    {
                        "reason": ev.get("reason"),
                        "type": ev.get("type"),
                        "message": ev.get("message", ev.get("note")),
                        "object": f"{regarding.get('kind', '')}/{regarding.get('namespace', '')}/"
                        f"{regarding.get('name', '')}",
                        "source": source,
                        "rv": int(ev["metadata"]["resourceVersion"]),
                        "raw": ev,
                    }
                )
        out.sort(key=lambda e: e["rv"])
        return out

    # -- request log ---------------------------------------------------------------------------

    def requests(self, verb: str | None = None, path: Any = None) -> list[RequestRecord]:
        """Logged requests. verb: HTTP method in UPPERCASE or Kubernetes verb in lowercase;
        path: fnmatch glob or compiled regex. Records have method, path, query, headers,
        content_type, body, json, verb, resource, namespace, name, status."""
        return self.faults.log(verb, path)

    def count(self, verb: str | None = None, path: Any = None) -> int:
        return self.faults.count(verb, path)

    def wait_for_requests(
        self, verb: str | None = None, path: Any = None, n: int = 1, timeout: float = 5.0
    ) -> list[RequestRecord]:
        """Block until at least n matching requests have been answered; returns them."""

        def done():
            recs = [r for r in self.requests(verb, path) if r.status is not None]
            return recs if len(recs) >= n else None

        return wait_for(done, timeout, f"{n} {verb or 'any'} request(s) on {path or '*'}")

    def clear_log(self) -> None:
        self.faults.clear_log()

    # -- faults --------------------------------------------------------------------------------

    def fail(self, verb: str | None, path: Any, status: int = 500, **kw):
        """Answer matching requests with an error; kw: times=1 (None=always), reason, message,
        after=False (perform the request, lose the answer), delay, retry_after."""
        return self.faults.fail(verb, path, status, **kw)

    def delay(self, verb: str | None, path: Any, seconds: float, *, times: int | None = None):
        return self.faults.delay(verb, path, seconds, times=times)

    def expire_next_watch(self, path: Any = None, *, times: int = 1, as_response: bool = False) -> None:
        self.faults.expire_next_watch(path, times=times, as_response=as_response)

    def drop_watches(self, path: Any = None, *, graceful: bool = False) -> int:
        return self.faults.drop_watches(path, graceful=graceful)

    def stall_watches(self, path: Any = None) -> None:
        self.faults.stall_watches(path)

    def unstall_watches(self) -> None:
        self.faults.unstall_watches()

    def clear_faults(self) -> None:
        self.faults.clear()

    def compact(self) -> int:
        return self.server.compact()

    def send_bookmarks(self) -> None:
        self.server.send_bookmarks()

    def restart_server(self, downtime: float = 0.0) -> None:
        """Cut every connection and listen again on the same port with the same state."""
        self.server.restart(downtime)

    def watches(self, path: Any = None) -> list:
        """Open watch connections (each has .record, the request that opened it)."""
        return self.faults.active_watches(path)

    def wait_for_watches(self, n: int = 1, path: Any = None, timeout: float = 5.0) -> list:
        """Block until at least n watches matching path are open (the product has synced)."""
        return wait_for(
            lambda: len(self.watches(path)) >= n and self.watches(path), timeout, f"{n} watch(es) on {path or '*'}"
        )


def _strip_for_delete(cur: dict) -> dict:
    cur["metadata"].pop("finalizers", None)
    cur["metadata"]["deletionTimestamp"] = cur["metadata"].get("deletionTimestamp") or "1970-01-01T00:00:00Z"
    cur["metadata"].pop("deletionGracePeriodSeconds", None)
    cur["metadata"].pop("resourceVersion", None)
    return cur


def wait_for(
    predicate: Callable[[], Any], timeout: float = 5.0, what: str = "condition", interval: float = 0.01
) -> Any:
    """Poll until predicate() is truthy (returned) or fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def _tls_material(tmpdir: str) -> tuple[ssl.SSLContext, bytes, str]:
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost", "::1")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(ctx)
    ca_file = os.path.join(tmpdir, "ca.pem")
    ca.cert_pem.write_to_path(ca_file)
    return ctx, ca.cert_pem.bytes(), ca_file


def start_kubeapi(tmpdir: str, *, tls: bool = False, **options) -> KubeAPI:
    """Start a server (and its client) outside pytest; call `stop_kubeapi(handle)` after."""
    ca_pem = ca_file = None
    if tls:
        ctx, ca_pem, ca_file = _tls_material(tmpdir)
        options["ssl_context"] = ctx
    server = KubeAPIServer(**options).start()
    try:
        path = server.write_kubeconfig(os.path.join(tmpdir, f"kubeconfig-{server.port}"), ca_pem=ca_pem)
        return KubeAPI(server, path, ca_pem, ca_file)
    except BaseException:
        server.stop()
        raise


def stop_kubeapi(handle: KubeAPI) -> None:
    try:
        handle.close()
    finally:
        handle.server.stop()


@pytest.fixture
def kubeapi_factory(tmp_path) -> Iterator[Callable[..., KubeAPI]]:
    handles: list[KubeAPI] = []
    gc.freeze()  # long-lived objects (client models, modules) out of the way of the collect below

    def make(*, tls: bool = False, **options) -> KubeAPI:
        d = tempfile.mkdtemp(dir=tmp_path)
        h = start_kubeapi(d, tls=tls, **options)
        handles.append(h)
        return h

    yield make
    # Collect now, so a response/socket the test leaked is reported against this test
    # (filterwarnings=error) rather than against whichever test the GC happens to run in.
    gc.collect()
    for h in reversed(handles):
        stop_kubeapi(h)


@pytest.fixture
def kubeapi(kubeapi_factory) -> KubeAPI:
    return kubeapi_factory()


@pytest.fixture
def kubeapi_tls(kubeapi_factory) -> KubeAPI:
    return kubeapi_factory(tls=True)

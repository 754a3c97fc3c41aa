"""HTTP front end: routes Kubernetes REST paths to the store, streams watches, applies faults.

One thread per connection (``ThreadingHTTPServer``), HTTP/1.1 keep-alive, watches as chunked
newline-delimited JSON exactly like kube-apiserver.
"""

from __future__ import annotations

import json
import os
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote, urlsplit

from . import selectors
from .access import Access
from .faults import Faults, RequestRecord
from .resources import Registry, ResourceType
from .store import ApiError, Store, dumps

LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass
class Route:
    rt: ResourceType | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    verb: str = ""
    legacy_watch: bool = False
    doc: dict | None = None  # discovery / health document

    @property
    def resource(self) -> str:
        if self.rt is None:
            return ""
        return self.rt.qualified + (f"/{self.subresource}" if self.subresource else "")


def _truthy(v: str | None) -> bool:
    return (v or "").lower() in ("1", "true", "yes")


class _Watch:
    """One open watch connection (for drop/stall/bookmark controls)."""

    def __init__(self, record: RequestRecord):
        self.record = record
        self.drop: str | None = None  # "abrupt" | "graceful"

    def __repr__(self) -> str:
        return f"<watch {self.record.path}?{self.record.query}>"


class NotFoundPath(Exception):
    pass


def route(registry: Registry, method: str, path: str, query: dict, version: str = "1.35") -> Route:
    segs = [unquote(s) for s in path.strip("/").split("/") if s]
    if not segs:
        raise NotFoundPath
    if segs == ["version"]:
        major, minor = version.split(".")
        git = f"v{version}.0-hami-fast-test"
        return Route(doc={"major": major, "minor": minor, "gitVersion": git, "platform": "linux/amd64"})
    if segs[0] in ("healthz", "readyz", "livez"):
        return Route(doc={"__text__": "ok"})
    if segs[0] == "api":
        if len(segs) == 1:
            return Route(doc=registry.api_versions())
        group, version, rest = "", segs[1], segs[2:]
    elif segs[0] == "apis":
        if len(segs) == 1:
            return Route(doc=registry.api_group_list())
        if len(segs) == 2:
            for g in registry.api_group_list()["groups"]:
                if g["name"] == segs[1]:
                    return Route(doc={"kind": "APIGroup", "apiVersion": "v1", **g})
            raise NotFoundPath
        group, version, rest = segs[1], segs[2], segs[3:]
    else:
        raise NotFoundPath
    if not rest:
        doc = registry.api_resource_list(group, version)
        if doc is None:
            raise NotFoundPath
        return Route(doc=doc)
    legacy_watch = False
    if rest[0] == "watch":
        legacy_watch, rest = True, rest[1:]
    ns = None
    if len(rest) >= 3 and rest[0] == "namespaces" and registry.get(group, version, rest[2]) is not None:
        ns, rest = rest[1], rest[2:]
    rt = registry.get(group, version, rest[0]) if rest else None
    if rt is None or len(rest) > 3 or (ns is not None and not rt.namespaced):
        raise NotFoundPath
    name = rest[1] if len(rest) >= 2 else None
    sub = rest[2] if len(rest) == 3 else None
    if sub is not None and sub not in rt.subresources:
        raise NotFoundPath
    if method == "GET":
        if legacy_watch or _truthy(query.get("watch")):
            verb = "watch"
        else:
            verb = "get" if name else "list"
    else:
        verb = {
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if name else "deletecollection",
        }.get(method, method.lower())
    return Route(rt, ns, name, sub, verb, legacy_watch)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, addr, handler, api: KubeAPIServer, ssl_context: ssl.SSLContext | None):
        if ":" in addr[0]:
            self.address_family = socket.AF_INET6
        self.api = api
        self.ssl_context = ssl_context
        self.conns: set[socket.socket] = set()
        self.threads: set[threading.Thread] = set()
        self.conn_lock = threading.Lock()
        super().__init__(addr, handler)

    def process_request_thread(self, request, client_address):
        with self.conn_lock:
            self.conns.add(request)
            self.threads.add(threading.current_thread())
        try:
            try:  # answers go out as several writes: without this, Nagle + delayed ACK add 40 ms each
                request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            if self.ssl_context is not None:
                request.settimeout(10)
                try:
                    request = self.ssl_context.wrap_socket(request, server_side=True)
                except (OSError, ssl.SSLError):
                    self.shutdown_request(request)
                    return
                with self.conn_lock:
                    self.conns.add(request)
            super().process_request_thread(request, client_address)
        finally:
            with self.conn_lock:
                self.conns.discard(request)
                self.threads.discard(threading.current_thread())

    def handle_error(self, request, client_address):  # client went away: not interesting
        pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kubeapi-test"
    timeout = 120  # idle keep-alive connections are closed after this
    server: _HTTPServer

    def log_message(self, format, *args):  # noqa: A002 - quiet
        pass

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = lambda self: self._handle()  # noqa: E731

    # -- plumbing ------------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _send(
        self, code: int, payload: bytes, content_type: str = "application/json", retry_after: int | None = None
    ) -> None:
        self.send_response(code)
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        # recorded before the answer leaves, so a client holding the answer finds the duration set
        self._record.duration = time.monotonic() - self._started
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _send_error(self, err: ApiError) -> None:
        self._record.status = err.code
        self._send(err.code, dumps(err.status()), retry_after=err.retry_after)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    # -- entry point ---------------------------------------------------------------------------

    def _handle(self) -> None:
        api = self.server.api
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        body = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            r = route(api.registry, self.command, url.path, query, api.version)
        except NotFoundPath:
            r = None
        rec = api.faults.record(
            dict(
                method=self.command,
                path=url.path,
                query=query,
                headers=headers,
                body=body,
                verb=r.verb if r else "",
                resource=r.resource if r else "",
                namespace=r.namespace if r else None,
                name=r.name if r else None,
            )
        )
        self._record = rec
        self._started = started = time.monotonic()
        try:
            if api.token is not None and headers.get("authorization") != f"Bearer {api.token}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            rules = api.faults.take(rec)
            for rule in rules:
                if rule.delay:
                    time.sleep(rule.delay)
            errors = [rule for rule in rules if rule.status]
            before = next((rule for rule in errors if not rule.after), None)
            if before is not None:
                raise ApiError(before.status, before.reason, before.message, retry_after=before.retry_after)
            if r is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if r.doc is not None:
                if "__text__" in r.doc:
                    rec.status = 200
                    return self._send(200, r.doc["__text__"].encode(), "text/plain; charset=utf-8")
                rec.status = 200
                return self._send(200, dumps(r.doc))
            if r.verb == "watch":
                return self._watch(r, query, rec)
            code, payload = self._dispatch(r, query, body, headers)
            after = next((rule for rule in errors if rule.after), None)
            if after is not None:
                raise ApiError(after.status, after.reason, after.message, retry_after=after.retry_after)
            rec.status = code
            self._send(code, payload)
        except ApiError as e:
            self._send_error(e)
        except (TimeoutError, ConnectionError, BrokenPipeError):
            self.close_connection = True
        finally:
            if rec.duration is None or (r is not None and r.verb == "watch"):  # a watch lasts past its headers
                rec.duration = time.monotonic() - started

    # -- verbs ---------------------------------------------------------------------------------

    def _transform(self, obj: dict) -> dict:
        if "as=PartialObjectMetadata" in self.headers.get("Accept", ""):
            return {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        return obj

    def _dispatch(self, r: Route, query: dict, body: bytes, headers: dict) -> tuple[int, bytes]:
        store, rt = self.server.api.store, r.rt
        dry_run = bool(query.get("dryRun"))

        def parsed() -> object:
            try:
                return json.loads(body) if body else None
            except ValueError:
                raise ApiError(400, "BadRequest", "the body of the request was in an unknown format")

        if r.verb == "get":
            if r.subresource not in (None, "status"):
                raise ApiError(
                    405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
                )
            return 200, dumps(self._transform(store.get(rt, r.namespace, r.name)))
        if r.verb == "list":
            return 200, self._list(r, query)
        if r.verb == "create":
            ct = headers.get("content-type", "application/json").split(";")[0].strip()
            if ct not in ("application/json", ""):
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: application/json",
                )
            obj = parsed()
            if r.subresource == "binding" or rt.plural == "bindings":
                name = r.name or ((obj or {}).get("metadata") or {}).get("name")
                if not name:
                    raise ApiError(400, "BadRequest", "a binding must name the pod")
                store.bind(r.namespace, name, obj or {})
                return 201, dumps(
                    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
                )
            if r.subresource == "eviction":
                store.evict(r.namespace, r.name, obj or {})
                return 201, dumps(
                    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
                )
            if r.name is not None:
                raise ApiError(
                    405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
                )
            if rt.plural == "tokenreviews":
                return 201, dumps(self.server.api.access.review_token(obj))
            if rt.plural == "subjectaccessreviews":
                return 201, dumps(self.server.api.access.review_access(obj))
            return 201, dumps(store.create(rt, r.namespace, obj, dry_run=dry_run))
        if r.verb == "update":
            if r.name is None:
                raise ApiError(
                    405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
                )
            obj = parsed()
            return 200, dumps(
                store.update(
                    rt,
                    r.namespace,
                    r.name,
                    lambda cur: obj,
                    subresource=r.subresource,
                    require_rv=rt.custom,
                    dry_run=dry_run,
                )
            )
        if r.verb == "patch":
            if r.name is None:
                raise ApiError(
                    405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
                )
            return 200, dumps(
                store.patch(
                    rt,
                    r.namespace,
                    r.name,
                    headers.get("content-type", ""),
                    parsed(),
                    subresource=r.subresource,
                    dry_run=dry_run,
                )
            )
        if r.verb == "delete":
            if r.subresource is not None:
                raise ApiError(
                    405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
                )
            options = parsed() or {}
            if "gracePeriodSeconds" in query:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            obj, _ = store.delete(rt, r.namespace, r.name, options, dry_run=dry_run)
            if rt.return_deleted_object:
                return 200, dumps(obj)
            details = {"name": r.name, "kind": rt.plural, "uid": obj["metadata"]["uid"]}
            if rt.group:
                details["group"] = rt.group
            return 200, dumps(
                {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
            )
        if r.verb == "deletecollection":
            match = self._matcher(query)
            items, _, _, _ = store.list(rt, r.namespace, match)
            for obj in list(items):
                try:
                    store.delete(rt, obj["metadata"].get("namespace"), obj["metadata"]["name"], dry_run=dry_run)
                except ApiError:
                    pass
            return 200, dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    @staticmethod
    def _matcher(query: dict):
        try:
            return selectors.matcher(query.get("labelSelector"), query.get("fieldSelector"))
        except selectors.SelectorError as e:
            raise ApiError(400, "BadRequest", str(e))

    def _list(self, r: Route, query: dict) -> bytes:
        rt = r.rt
        try:
            limit = int(query["limit"]) if query.get("limit") else None
        except ValueError:
            raise ApiError(400, "BadRequest", f"invalid limit {query['limit']!r}")
        items, rv, cont, remaining = self.server.api.store.list(
            rt, r.namespace, self._matcher(query), limit, query.get("continue") or None
        )
        meta: dict = {"resourceVersion": str(rv)}
        if cont:
            meta["continue"] = cont
            meta["remainingItemCount"] = remaining
        partial = "as=PartialObjectMetadata" in self.headers.get("Accept", "")
        if partial:
            head = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
            parts = [dumps(self._transform(o)) for o in items]
        else:
            head = {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta}
            if rt.custom:
                parts = [dumps(o) for o in items]
            else:  # built-in list items carry no apiVersion/kind, as kube-apiserver sends them
                parts = [dumps({k: v for k, v in o.items() if k not in ("apiVersion", "kind")}) for o in items]
        return dumps(head)[:-1] + b',"items":[' + b",".join(parts) + b"]}"

    # -- watch ---------------------------------------------------------------------------------

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _client_gone(self) -> bool:
        sock = self.connection
        if isinstance(sock, ssl.SSLSocket):
            return False
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _watch(self, r: Route, query: dict, rec: RequestRecord) -> None:
        api = self.server.api
        store, rt = api.store, r.rt
        match = self._matcher(query)
        ns = r.namespace
        if r.name:  # /watch/.../name, or ?watch=1 on an object's path
            name, base = r.name, match
            match = lambda o: o["metadata"]["name"] == name and (base is None or base(o))  # noqa: E731
        bookmarks = _truthy(query.get("allowWatchBookmarks"))
        send_initial = _truthy(query.get("sendInitialEvents"))
        try:
            timeout = float(query.get("timeoutSeconds") or api.default_watch_timeout)
        except ValueError:
            raise ApiError(400, "BadRequest", "invalid timeoutSeconds")
        expire, as_response = api.faults.take_expire(rec)
        gone: ApiError | None = None
        initial: list[dict] = []
        start_rv = 0
        if expire:
            gone = ApiError(
                410, "Expired", f"too old resource version: {query.get('resourceVersion', '')} ({store.compacted_rv})"
            )
        else:
            try:
                initial, start_rv = store.watch_start(rt, ns, query.get("resourceVersion"), send_initial, match)
            except ApiError as e:
                if e.code != 410:
                    raise
                gone, as_response = e, api.watch_gone_as_response
        if gone is not None and as_response:
            raise gone
        rec.status = 200
        self._start_stream()
        if gone is not None:
            self._chunk(dumps({"type": "ERROR", "object": gone.status()}) + b"\n")
            self._end_stream()
            return

        def bookmark(rv: int, initial_end: bool = False) -> bytes:
            meta: dict = {"resourceVersion": str(rv), "creationTimestamp": None}
            if initial_end:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            obj = self._transform({"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta})
            return dumps({"type": "BOOKMARK", "object": obj}) + b"\n"

        w = _Watch(rec)
        api.faults.register_watch(w)
        try:
            for obj in initial:
                self._chunk(dumps({"type": "ADDED", "object": self._transform(obj)}) + b"\n")
            if send_initial and bookmarks:
                self._chunk(bookmark(start_rv, initial_end=True))
            last = start_rv
            deadline = time.monotonic() + min(timeout, api.max_watch_timeout)
            next_bm = time.monotonic() + api.bookmark_interval
            bm_epoch = api.bookmark_epoch
            while True:
                events, ending, send_bm, error = [], None, False, None
                with store.cond:
                    while True:
                        now = time.monotonic()
                        if w.drop or api.stopping:
                            ending = w.drop or "graceful"
                            break
                        if now >= deadline:
                            ending = "graceful"
                            break
                        stalled = api.faults.is_stalled(rec)
                        if not stalled:
                            try:
                                events = store.events_after(last)
                            except ApiError as e:  # fell behind the bounded history
                                error, ending = e, "graceful"
                                break
                            send_bm = bookmarks and (now >= next_bm or api.bookmark_epoch != bm_epoch)
                            if events or send_bm:
                                break
                        if self._client_gone():
                            ending = "abrupt"
                            break
                        wake = min(deadline, now + 0.5, next_bm if bookmarks and not stalled else deadline)
                        store.cond.wait(max(0.0, wake - now))
                for ev in events:
                    last = ev.rv
                    line = self._event_line(ev, rt, ns, match)
                    if line:
                        self._chunk(line)
                if error is not None:
                    self._chunk(dumps({"type": "ERROR", "object": error.status()}) + b"\n")
                if send_bm and ending is None:
                    self._chunk(bookmark(last))
                    next_bm = time.monotonic() + api.bookmark_interval
                    bm_epoch = api.bookmark_epoch
                if ending == "abrupt":
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if ending:
                    self._end_stream()
                    return
        except (TimeoutError, ConnectionError, BrokenPipeError, OSError):
            self.close_connection = True
        finally:
            api.faults.unregister_watch(w)

    def _event_line(self, ev, rt: ResourceType, ns: str | None, match) -> bytes | None:
        if ev.rt_key != rt.key or (rt.namespaced and ns is not None and ev.namespace != ns):
            return None
        partial = "as=PartialObjectMetadata" in self.headers.get("Accept", "")
        if match is None:
            return ev.line(self._transform(ev.obj)) if partial else ev.line()
        if ev.type == "ADDED":
            type_ = "ADDED" if match(ev.obj) else None
        elif ev.type == "DELETED":
            type_ = "DELETED" if match(ev.prev or ev.obj) else None
        else:
            old, new = match(ev.prev) if ev.prev else False, match(ev.obj)
            type_ = "MODIFIED" if old and new else "ADDED" if new else "DELETED" if old else None
        if type_ is None:
            return None
        return ev.line(self._transform(ev.obj), type_)


class KubeAPIServer:
    """A Kubernetes API server for tests: real HTTP, in-memory state.

    ``with KubeAPIServer() as api: api.url`` or ``api.start()`` / ``api.stop()``.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        ssl_context: ssl.SSLContext | None = None,
        token: str | None = None,
        history_size: int = 10_000,
        bookmark_interval: float = 1.0,
        default_watch_timeout: float = 1800.0,
        max_watch_timeout: float = 3600.0,
        watch_gone_as_response: bool = False,
        registry: Registry | None = None,
    ):
        if host not in LOOPBACK:
            raise ValueError("the test API server only listens on loopback addresses")
        self.host, self.port = host, port
        self.ssl_context = ssl_context
        self.token = token  # None: any bearer token (or none) is accepted
        self.version = "1.35"  # what /version answers, major.minor
        self.registry = registry or Registry()
        self.store = Store(self.registry, history_size=history_size)
        self.faults = Faults(wake=self.wake)
        self.access = Access()  # TokenReview / SubjectAccessReview answers
        self.bookmark_interval = bookmark_interval
        self.bookmark_epoch = 0
        self.default_watch_timeout = default_watch_timeout
        self.max_watch_timeout = max_watch_timeout
        self.watch_gone_as_response = watch_gone_as_response
        self.stopping = False
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> KubeAPIServer:
        """Listen (again: after stop(), the same port and the same in-memory state)."""
        self.stopping = False
        self._httpd = _HTTPServer((self.host, self.port), Handler, self, self.ssl_context)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=f"kubeapi-{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0, *, abrupt: bool = False) -> None:
        """Stop serving. Open watches end cleanly, or are cut mid-stream with abrupt=True."""
        if self._httpd is None:
            return
        if abrupt:
            self.faults.drop_watches()
        self.stopping = True
        self.wake()
        self._httpd.shutdown()
        with self._httpd.conn_lock:
            conns, threads = list(self._httpd.conns), list(self._httpd.threads)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout)
        self._httpd = None

    def restart(self, downtime: float = 0.0) -> None:
        """Stop (every connection cut), stay down `downtime` seconds, listen again on the same
        port. Objects, history and resourceVersions survive, as with a restarted kube-apiserver."""
        self.stop(abrupt=True)
        time.sleep(downtime)
        self.start()

    def __enter__(self) -> KubeAPIServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"

    # -- controls ------------------------------------------------------------------------------

    def wake(self) -> None:
        with self.store.cond:
            self.store.cond.notify_all()

    def send_bookmarks(self) -> None:
        """Make every open watch that allows bookmarks send one now."""
        self.bookmark_epoch += 1
        self.wake()

    def compact(self) -> int:
        """Drop the event history: watches/continue tokens from older resourceVersions get 410."""
        return self.store.compact()

    def write_kubeconfig(
        self,
        path: str | os.PathLike,
        *,
        token: str | None = "test-token",
        ca_pem: bytes | None = None,
        namespace: str = "default",
    ) -> str:
        import base64

        cluster: dict = {"server": self.url}
        if ca_pem is not None:
            cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
        user = {"token": self.token or token} if (self.token or token) else {}
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [{"name": "kubeapi-test", "cluster": cluster}],
            "users": [{"name": "kubeapi-test", "user": user}],
            "contexts": [
                {
                    "name": "kubeapi-test",
                    "context": {"cluster": "kubeapi-test", "user": "kubeapi-test", "namespace": namespace},
                }
            ],
            "current-context": "kubeapi-test",
        }
        with open(path, "w") as f:
            json.dump(cfg, f, indent=2)  # JSON is valid YAML: any kubeconfig loader reads it
        return str(path)

"""One API client for every call: the official `kubernetes` client for config, auth and TLS; raw bytes on the wire.

Python never builds model objects here: request bodies are bytes made in Rust, responses go back as bytes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from hami_fast.kube import deadline
from hami_fast.kube.errors import ApiError, api_error, from_response

MERGE_PATCH = "application/merge-patch+json"
JSON = "application/json"


@dataclass
class Response:
    status: int
    data: bytes

    def json(self) -> Any:
        return orjson.loads(self.data)


class TokenBucket:
    """Client-side rate limit shared by all calls (QPS with burst), as client-go's."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps, self.burst = qps, max(1, burst)
        self.tokens = float(self.burst)
        self.stamp = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> None:
        if self.qps <= 0:
            return
        while True:
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.qps)
                self.stamp = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return
                wait = (1 - self.tokens) / self.qps
            time.sleep(wait)


class KubeconfigError(ValueError):
    """No usable cluster configuration; the message names the file or says where we looked."""


def _kubeconfig_files(kubeconfig: str) -> tuple[str, list[Path]]:
    """Where the kubeconfig comes from (for messages) and its files, as kubectl resolves them."""
    if kubeconfig:
        return "--kubeconfig", [Path(kubeconfig)]
    if os.environ.get("KUBECONFIG"):
        return "KUBECONFIG", [Path(p) for p in os.environ["KUBECONFIG"].split(os.pathsep) if p]
    return "default", [Path.home() / ".kube" / "config"]


def load_api_client(kubeconfig: str = "") -> k8s_client.ApiClient:
    """kubeconfig path, else KUBECONFIG / ~/.kube/config, else in-cluster config.

    Raises KubeconfigError (one line) for a missing or unusable file, or when there is no
    configuration at all.
    """
    configuration = k8s_client.Configuration()
    source, files = _kubeconfig_files(kubeconfig)
    present = [f for f in files if f.is_file()]
    if present:
        try:
            k8s_config.load_kube_config(
                config_file=os.pathsep.join(map(str, present)), client_configuration=configuration
            )
        except (k8s_config.ConfigException, OSError, TypeError, ValueError, AttributeError) as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise KubeconfigError(f"kubeconfig {', '.join(map(str, present))}: {message}") from None
    elif source != "default":
        missing = ", ".join(map(str, files)) or "(empty)"
        raise KubeconfigError(f"kubeconfig {missing} ({source}): no such file")
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except k8s_config.ConfigException:
            raise KubeconfigError(
                f"no kubeconfig: {files[0]} does not exist, KUBECONFIG is not set and this is not a pod in a cluster"
                " (pass --kubeconfig FILE)"
            ) from None
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 96)  # binds + lanes
    return k8s_client.ApiClient(configuration)


def path_of(*segments: str) -> str:
    return "/" + "/".join(quote(s, safe="") for s in segments)


def pod_path(namespace: str, name: str, *sub: str) -> str:
    return path_of("api", "v1", "namespaces", namespace, "pods", name, *sub)


class KubeClient:
    def __init__(
        self, api_client: k8s_client.ApiClient, qps: float = 5.0, burst: int = 10, timeout: float = 30.0
    ) -> None:
        self.api_client = api_client
        self.bucket = TokenBucket(qps, burst)
        self.timeout = timeout or 30.0

    def _prepare(
        self, method: str, path: str, query: list[tuple[str, Any]] | None, content_type: str | None
    ) -> tuple[str, dict[str, str]]:
        headers = {"Accept": JSON}
        if content_type:
            headers["Content-Type"] = content_type
        _, url, headers, _, _ = self.api_client.param_serialize(
            method, path, query_params=query or [], header_params=headers, auth_settings=["BearerToken"]
        )
        return url, headers

    def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        timeout: float | None = None,
        ok: tuple[int, ...] = (200, 201),
        limited: bool = True,
        guard: Callable[[], None] | None = None,
    ) -> Response:
        """`guard` runs last before the request is sent (after the rate limiter's wait) and may raise
        to stop it: a write that must not outlive a condition (this replica leading)."""
        if limited:
            self.bucket.take()
        if guard is not None:
            guard()
        total = deadline.request_timeout(timeout or self.timeout)
        if total < deadline.MIN_REQUEST_TIME:
            raise api_error(0, "DeadlinePassed", "not sent: its caller's deadline has passed", method, path)
        url, headers = self._prepare(method, path, query, content_type or (JSON if body is not None else None))
        try:
            raw = self.api_client.rest_client.pool_manager.request(
                method,
                url,
                body=body,
                headers=headers,
                timeout=urllib3.Timeout(total=total),
                retries=False,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise api_error(0, type(exc).__name__, str(exc), method, path) from exc
        response = Response(raw.status, raw.data)
        if response.status not in ok:
            raise self._error(response, method, path, raw.headers.get("Retry-After"))
        return response

    @staticmethod
    def _error(response: Response, method: str, path: str, retry_after: str | None = None) -> ApiError:
        return from_response(response.status, response.data, method, path, retry_after)

    def get_pod(self, namespace: str, name: str, cached: bool = False) -> dict[str, Any]:
        """The pod, else `errors.NotFound`. `cached`: from the watch cache (resourceVersion=0), cheaper, maybe stale."""
        query = [("resourceVersion", "0")] if cached else None
        return self.request("GET", pod_path(namespace, name), query=query).json()

    def stream_lines(self, path: str, query: list[tuple[str, Any]], read_timeout: float) -> Iterator[bytes]:
        """A WATCH: yields raw event lines; raises ApiError on a non-200 answer; stops when the server closes."""
        url, headers = self._prepare("GET", path, query, None)
        raw = self.api_client.rest_client.pool_manager.request(
            "GET",
            url,
            headers=headers,
            preload_content=False,
            timeout=urllib3.Timeout(connect=10, read=read_timeout),
            retries=False,
        )
        try:
            if raw.status != 200:
                raise self._error(Response(raw.status, raw.read()), "WATCH", path)
            buffer = b""
            for chunk in raw.stream(64 * 1024, decode_content=True):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                yield from (line for line in lines if line.strip())
            if buffer.strip():
                yield buffer
        finally:
            raw.release_conn()

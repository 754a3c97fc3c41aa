"""Who may use the descheduler's API, and how it is reached (docs/descheduler.md, "Access").

Every request but the health checks and the admission webhook needs a bearer token the API server
accepts (TokenReview) and one of these permissions (SubjectAccessReview), in the descheduler's
namespace (a RoleBinding there or a ClusterRoleBinding grants it):

| request | permission |
|---|---|
| `GET` (the GPU map, cluster info, placements, fragmentation) | `get` on `descheduler/api` in the API group `hami-fast.io` |
| `POST` (`/api/v1/plan`, `/api/v1/placements/validate`: dry runs, but costly) | `create` on `descheduler/plan` in `hami-fast.io` |
| `GET /metrics` | `get` on the non-resource URL `/metrics`, as controller-runtime's metrics |

The resource is virtual (no such API exists; RBAC needs none). It is not the non-resource URL of
each path because `/api/*` is granted to every authenticated user by `system:discovery`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from hami_fast.kube.access import Attributes

GROUP = "hami-fast.io"
RESOURCE = "descheduler"
METRICS = "/metrics"
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/webhook"})
AUTH_MODES = ("auto", "kubernetes", "none")


def attributes_in(namespace: str) -> Callable[[str, str], Attributes]:
    def attributes(method: str, path: str) -> Attributes:
        if path == METRICS:
            return Attributes("get", path=METRICS)
        if method in ("GET", "HEAD"):
            return Attributes("get", group=GROUP, resource=RESOURCE, subresource="api", namespace=namespace)
        return Attributes("create", group=GROUP, resource=RESOURCE, subresource="plan", namespace=namespace)

    return attributes


def host_of(address: str) -> str:
    return address.rpartition(":")[0].strip("[]")


def is_loopback(address: str) -> bool:
    host = host_of(address)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def auth_mode(requested: str, bind: str, snapshot: bool) -> str:
    """`kubernetes` or `none` for the API on `bind`; ValueError (one line) for a combination that cannot work.

    `auto`: none on a loopback address (only this machine reaches it), kubernetes elsewhere.
    """
    mode = requested if requested != "auto" else ("none" if is_loopback(bind) else "kubernetes")
    if mode == "kubernetes" and snapshot:
        raise ValueError(
            f"--api-auth=kubernetes: with --snapshot there is no API server to check tokens with; serve the snapshot"
            f" on a loopback address (--bind 127.0.0.1:{bind.rpartition(':')[2]}) or pass --api-auth=none"
        )
    return mode


def require_loopback(address: str, flag: str) -> None:
    if not is_loopback(address):
        raise ValueError(
            f"{flag} {address}: not a loopback address; this listener answers without authentication, so it"
            " listens on 127.0.0.1 (or ::1) only"
        )

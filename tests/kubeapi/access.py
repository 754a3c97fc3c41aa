"""TokenReview and SubjectAccessReview for the test API server: users by token, and RBAC-like rules.

    api.access.add_user("t0ken", "alice", groups=("team-a",))
    api.access.grant("user:alice", verbs=("get",), api_groups=("hami-fast.io",), resources=("descheduler/api",),
                     namespace="hami-system")
    api.access.grant("group:system:monitoring", verbs=("get",), non_resource_urls=("/metrics",))

A review asks about users; the caller making the review is not checked (any bearer token is
accepted, as everywhere in this server). Rules match as RBAC's do: `*` in verbs, groups and
resources; a resource with its subresource as `resource/subresource`; a non-resource URL exactly
or by a trailing `*`; a rule with a namespace only for requests in that namespace (a RoleBinding),
one without for any (a ClusterRoleBinding). Every authenticated user is in `system:authenticated`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass(frozen=True)
class AccessRule:
    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()
    namespace: str | None = None

    def allows(self, spec: dict) -> bool:
        resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if non_resource is not None:
            return self._verb(non_resource.get("verb", "")) and any(
                _url_matches(url, non_resource.get("path", "")) for url in self.non_resource_urls
            )
        if resource is None or not self._verb(resource.get("verb", "")):
            return False
        if self.namespace is not None and resource.get("namespace", "") != self.namespace:
            return False
        name = resource.get("resource", "") + (f"/{resource['subresource']}" if resource.get("subresource") else "")
        group_ok = any(g in ("*", resource.get("group", "")) for g in self.api_groups)
        return group_ok and any(r in ("*", name) for r in self.resources)

    def _verb(self, verb: str) -> bool:
        return any(v in ("*", verb) for v in self.verbs)


def _url_matches(rule: str, path: str) -> bool:
    return rule == path or (rule.endswith("*") and path.startswith(rule[:-1]))


@dataclass
class Access:
    users: dict[str, dict] = field(default_factory=dict)  # token -> TokenReview status.user
    rules: dict[str, list[AccessRule]] = field(default_factory=dict)  # "user:x" / "group:y" -> rules
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_user(self, token: str, name: str, groups: tuple[str, ...] = (), uid: str = "") -> None:
        with self.lock:
            self.users[token] = {
                "username": name,
                "uid": uid or f"{name}-uid",
                "groups": [*groups, "system:authenticated"],
            }

    def remove_user(self, token: str) -> None:
        with self.lock:
            self.users.pop(token, None)

    def grant(
        self,
        subject: str,
        *,
        verbs: tuple[str, ...],
        api_groups: tuple[str, ...] = (),
        resources: tuple[str, ...] = (),
        non_resource_urls: tuple[str, ...] = (),
        namespace: str | None = None,
    ) -> None:
        rule = AccessRule(tuple(verbs), tuple(api_groups), tuple(resources), tuple(non_resource_urls), namespace)
        with self.lock:
            self.rules.setdefault(subject, []).append(rule)

    def revoke(self, subject: str) -> None:
        with self.lock:
            self.rules.pop(subject, None)

    def review_token(self, review: dict) -> dict:
        token = ((review or {}).get("spec") or {}).get("token", "")
        with self.lock:
            user = self.users.get(token)
        status = {"authenticated": True, "user": user} if user else {"authenticated": False, "error": "invalid token"}
        return _answer(review, "authentication.k8s.io/v1", "TokenReview", status)

    def review_access(self, review: dict) -> dict:
        spec = (review or {}).get("spec") or {}
        subjects = [f"user:{spec.get('user', '')}", *(f"group:{g}" for g in spec.get("groups") or ())]
        with self.lock:
            allowed = any(rule.allows(spec) for s in subjects for rule in self.rules.get(s, ()))
        status = {"allowed": allowed, **({"reason": "granted by a test rule"} if allowed else {})}
        return _answer(review, "authorization.k8s.io/v1", "SubjectAccessReview", status)


def _answer(review: dict, api_version: str, kind: str, status: dict) -> dict:
    return {
        "kind": kind,
        "apiVersion": api_version,
        "metadata": {"creationTimestamp": None},
        "spec": (review or {}).get("spec") or {},
        "status": status,
    }

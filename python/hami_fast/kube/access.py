"""Who is asking, and may they: the Kubernetes way of guarding an HTTP endpoint.

A bearer token is checked with a TokenReview, then the request with a SubjectAccessReview for the
user the review returned, as kube-apiserver's delegated authentication and authorisation (and
controller-runtime's secure metrics) do. Both answers, yes or no, are kept for `ttl` seconds
(kube-apiserver's delegating authenticator and authoriser keep theirs 10 s), keyed by a hash of
the token, so a page polling every few seconds costs the API server one review pair per `ttl`.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import orjson

from hami_fast.kube.client import KubeClient
from hami_fast.kube.errors import ApiError

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Attributes:
    """What a request does, as a SubjectAccessReview asks it: a non-resource URL (`path`) and a
    verb, or a verb on a (possibly virtual) resource."""

    verb: str
    path: str = ""
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    def spec(self) -> dict[str, Any]:
        if self.path:
            return {"nonResourceAttributes": {"path": self.path, "verb": self.verb}}
        attributes = {"verb": self.verb, "group": self.group, "resource": self.resource}
        attributes |= {k: v for k, v in (("subresource", self.subresource), ("namespace", self.namespace)) if v}
        if self.name:
            attributes["name"] = self.name
        return {"resourceAttributes": attributes}

    def describe(self) -> str:
        if self.path:
            return f'{self.verb} on the non-resource URL "{self.path}"'
        what = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f' in the namespace "{self.namespace}"' if self.namespace else ""
        return f'{self.verb} on "{what}" in the API group "{self.group}"{where}'


class ReviewFailed(Exception):
    """The API server gave no usable answer to a review (unreachable, 5xx, forbidden to review)."""


K = TypeVar("K")
V = TypeVar("V")


@dataclass
class TtlCache(Generic[K, V]):
    """At most `size` answers, each kept `ttl` seconds; the oldest is dropped first."""

    ttl: float
    size: int = 4096
    entries: OrderedDict[K, tuple[float, V]] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: K) -> tuple[bool, V | None]:
        with self.lock:
            hit = self.entries.get(key)
            if hit is None or hit[0] < time.monotonic():
                return False, None
            return True, hit[1]

    def put(self, key: K, value: V) -> None:
        if self.ttl <= 0:
            return
        with self.lock:
            self.entries.pop(key, None)
            self.entries[key] = (time.monotonic() + self.ttl, value)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)


class KubeAccess:
    """TokenReview and SubjectAccessReview through `client`, answers cached for `ttl` seconds."""

    def __init__(self, client: KubeClient, ttl: float = 10.0) -> None:
        self.client = client
        self.users: TtlCache[str, User | None] = TtlCache(ttl)
        self.decisions: TtlCache[tuple[User, Attributes], tuple[bool, str]] = TtlCache(ttl)

    def authenticate(self, token: str) -> User | None:
        """The token's user, or None when the API server does not accept the token."""
        key = hashlib.sha256(token.encode()).hexdigest()
        hit, user = self.users.get(key)
        if hit:
            return user
        status = self._review(TOKEN_REVIEWS, {"kind": "TokenReview", "spec": {"token": token}})
        user = _user(status.get("user") or {}) if status.get("authenticated") else None
        self.users.put(key, user)
        return user

    def allowed(self, user: User, attributes: Attributes) -> tuple[bool, str]:
        """Whether `user` may do `attributes`, and the authoriser's reason."""
        hit, decision = self.decisions.get((user, attributes))
        if hit and decision is not None:
            return decision
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups), **attributes.spec()}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        status = self._review(ACCESS_REVIEWS, {"kind": "SubjectAccessReview", "spec": spec})
        decision = (bool(status.get("allowed")) and not status.get("denied"), str(status.get("reason") or ""))
        self.decisions.put((user, attributes), decision)
        return decision

    def _review(self, path: str, review: dict[str, Any]) -> dict[str, Any]:
        group = path.split("/")[2]
        body = orjson.dumps({"apiVersion": f"{group}/v1", **review})
        try:
            answer = self.client.request("POST", path, body=body).json()
        except ApiError as exc:
            raise ReviewFailed(f"{review['kind']} failed: {exc}") from None
        except orjson.JSONDecodeError:
            raise ReviewFailed(f"{review['kind']} failed: the answer is not JSON") from None
        status = answer.get("status") if isinstance(answer, dict) else None
        if not isinstance(status, dict):
            raise ReviewFailed(f"{review['kind']} failed: the answer has no status")
        return status


def _user(info: dict[str, Any]) -> User:
    extra = info.get("extra") or {}
    return User(
        name=str(info.get("username") or ""),
        uid=str(info.get("uid") or ""),
        groups=tuple(str(g) for g in info.get("groups") or ()),
        extra=tuple(sorted((str(k), tuple(str(v) for v in vs or ())) for k, vs in extra.items())),
    )


def bearer_token(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header, or ''."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""

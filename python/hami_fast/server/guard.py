"""An RSGI app behind Kubernetes authentication and authorisation (`kube/access.py`).

| request | answer |
|---|---|
| path in `open_paths` (health, the admission webhook) | the app's, unchecked |
| no `Authorization: Bearer` token | 401 |
| a token the API server does not accept (TokenReview) | 401 |
| a user the API server does not allow the request's attributes (SubjectAccessReview) | 403, naming the user and the permission |
| the API server cannot answer a review | 503 |
| otherwise | the app's answer |
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hami_fast.kube.access import Attributes, KubeAccess, ReviewFailed, bearer_token
from hami_fast.server.router import JSON, error_body

log = logging.getLogger("hami_fast.http")

Verdict = tuple[int, str]  # (0, "") lets the request through


class Guarded:
    def __init__(
        self,
        app: Any,
        access: KubeAccess,
        attributes: Callable[[str, str], Attributes],
        open_paths: frozenset[str],
        realm: str,
        hint: str = "",
    ) -> None:
        """`hint`: added to the 401 without a token (where else to go, e.g. for a browser)."""
        self.app, self.access, self.attributes, self.open_paths = app, access, attributes, open_paths
        self.realm, self.hint = realm, hint
        # Reviews may wait on the API server: their own small pool, so a flood of bad tokens
        # cannot take the app's handler threads.
        self.reviews = ThreadPoolExecutor(max_workers=4, thread_name_prefix="access-review")

    def __rsgi_init__(self, loop: Any) -> None:
        getattr(self.app, "__rsgi_init__", lambda _: None)(loop)

    def __rsgi_del__(self, loop: Any) -> None:
        getattr(self.app, "__rsgi_del__", lambda _: None)(loop)

    async def __rsgi__(self, scope: Any, protocol: Any) -> None:
        if scope.proto == "http" and scope.path not in self.open_paths:
            token = bearer_token(scope.headers.get("authorization"))
            loop = asyncio.get_running_loop()
            status, message = await loop.run_in_executor(self.reviews, self.verdict, token, scope.method, scope.path)
            if status:
                headers = [("content-type", JSON)]
                if status == 401:
                    headers.append(("www-authenticate", f'Bearer realm="{self.realm}"'))
                protocol.response_bytes(status, headers, error_body(message))
                return
        await self.app.__rsgi__(scope, protocol)

    def verdict(self, token: str, method: str, path: str) -> Verdict:
        if not token:
            return 401, f"Unauthorized: send a bearer token (Authorization: Bearer <token>){self.hint}"
        try:
            user = self.access.authenticate(token)
            if user is None:
                return 401, "Unauthorized: the API server does not accept this token (TokenReview)"
            attributes = self.attributes(method, path)
            allowed, reason = self.access.allowed(user, attributes)
        except ReviewFailed as exc:
            log.warning("cannot check a request's access", extra={"path": path, "error": str(exc)})
            return 503, f"cannot check access now: {exc}"
        if not allowed:
            why = f" ({reason})" if reason else ""
            return 403, f'Forbidden: user "{user.name}" cannot {attributes.describe()}{why}'
        return 0, ""

    def close(self) -> None:
        self.reviews.shutdown(wait=False, cancel_futures=True)

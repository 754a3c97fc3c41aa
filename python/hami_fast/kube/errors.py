"""API server errors as types: one class per HTTP status, made in one place (kopf's style).

Callers catch what they mean (`except NotFound`, `except Conflict`) instead of comparing
`exc.status`. Every class derives from `ApiError`, which keeps `.status`, `.reason` and `.message`,
so `except ApiError` still catches them all.

`api_error` is the only place a status becomes a class; `from_response` (raw bytes, as `KubeClient`
reads them) and `from_api_exception` (the official client's `ApiException`) both go through it.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson


class ApiError(Exception):
    """A non-2xx answer from the API server (status 0: no answer at all), with its Status reason and message.

    Made with a method and path, `str()` reads `GET /api/v1/...: 404 NotFound: <message>`; made
    without (a writer naming the object itself), `str()` is the message alone.
    """

    default_status: ClassVar[int] = 0

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        method: str = "",
        path: str = "",
        retry_after: float | None = None,
    ) -> None:
        self.status = self.default_status if status is None else status
        self.reason, self.message, self.method, self.path = reason, message, method, path
        self.retry_after = retry_after  # seconds, from a Retry-After header (429 and 5xx)
        super().__init__(f"{method} {path}: {self.status} {reason}: {message}" if method else message)


class Unreachable(ApiError):
    """No HTTP answer: connection refused, reset, TLS failure or timeout (status 0)."""


class BadRequest(ApiError):
    default_status = 400


class Unauthorized(ApiError):
    default_status = 401


class Forbidden(ApiError):
    default_status = 403


class NotFound(ApiError):
    default_status = 404


class MethodNotAllowed(ApiError):
    default_status = 405


class Conflict(ApiError):
    """HTTP 409: the object changed since it was read (write with its resourceVersion again), or, as
    the subclass `AlreadyExists`, a create found the name taken. `except Conflict` catches both."""

    default_status = 409


class AlreadyExists(Conflict):
    """HTTP 409 with reason AlreadyExists: a POST (create) of a name that exists."""


class Gone(ApiError):
    """HTTP 410 (reason Expired): a watch or continue token's resourceVersion is too old; re-list."""

    default_status = 410


class Invalid(ApiError):
    """HTTP 422: the object failed validation."""

    default_status = 422


class TooManyRequests(ApiError):
    """HTTP 429: API priority and fairness throttled us, or an Eviction a disruption budget refuses."""

    default_status = 429


class ServerError(ApiError):
    """HTTP 5xx: the API server (or something in front of it) failed; retry later."""

    default_status = 500


_BY_STATUS: dict[int, type[ApiError]] = {
    0: Unreachable,
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def error_class(status: int, reason: str = "") -> type[ApiError]:
    if status == 409 and reason == "AlreadyExists":
        return AlreadyExists
    if status >= 500:
        return ServerError
    return _BY_STATUS.get(status, ApiError)


def api_error(
    status: int, reason: str, message: str, method: str = "", path: str = "", retry_after: float | None = None
) -> ApiError:
    """The one translation from an HTTP status (and Status reason) to the error type."""
    return error_class(status, reason)(
        message, status=status, reason=reason, method=method, path=path, retry_after=retry_after
    )


def retry_after_seconds(header: str | None) -> float | None:
    """A Retry-After header in whole seconds, as the API server sends it and client-go reads it
    (an HTTP date or anything else is ignored, as client-go ignores it)."""
    if header is None or not header.strip().isdigit():
        return None
    return float(int(header))


def from_response(status: int, body: bytes, method: str, path: str, retry_after: str | None = None) -> ApiError:
    """An error answer's body is a `Status` object when the API server wrote it; anything else is quoted."""
    reason, message = _status_fields(body)
    return api_error(status, reason, message, method, path, retry_after_seconds(retry_after))


def from_api_exception(exc: Any, method: str = "", path: str = "") -> ApiError:
    """`kubernetes.client.ApiException` (or `kubernetes.client.exceptions.ApiException`) -> the typed error."""
    body = exc.body if isinstance(exc.body, bytes) else str(exc.body or "").encode()
    reason, message = _status_fields(body)
    retry_after = retry_after_seconds((getattr(exc, "headers", None) or {}).get("Retry-After"))
    return api_error(int(exc.status or 0), reason or str(exc.reason or ""), message, method, path, retry_after)


def _status_fields(body: bytes) -> tuple[str, str]:
    try:
        status = orjson.loads(body)
        if isinstance(status, dict):
            return str(status.get("reason") or ""), str(status.get("message") or "")
    except orjson.JSONDecodeError:
        pass
    return "", body[:200].decode(errors="replace")

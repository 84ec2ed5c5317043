"""The error envelope as exceptions: one class per documented error type.

Every error degrau answers is ``{"error": {"type", "message"}}`` with a status;
:func:`error_from_response` raises the class of its type, carrying the status, the
type, the message and ``Retry-After`` (in seconds, from seconds or an HTTP date)
when the response gave one.
"""

from __future__ import annotations

from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import httpx


class DegrauError(Exception):
    """An error answer of the degrau API (also raised for an unknown type)."""

    type: str = "unknown"

    def __init__(
        self,
        status: int,
        type: str,
        message: str,
        retry_after: float | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(f"{status} {type}: {message}")
        self.status = status
        self.type = type
        self.message = message
        self.retry_after = retry_after
        self.body = body


class InvalidRequest(DegrauError):
    """400: the request is malformed or breaks a rule; nothing was written."""

    type = "invalid_request"


class Unauthenticated(DegrauError):
    """401: no tenant (no token, or no ``X-Tenant-Id`` in dev mode)."""

    type = "unauthenticated"


class Forbidden(DegrauError):
    """403: the token (or ``X-Scopes`` in dev mode) lacks the scope the operator
    route requires; nothing was read or written."""

    type = "forbidden"


class NotFound(DegrauError):
    """404: no such route, or nothing stored under it (a contact, a fact)."""

    type = "not_found"


class MethodNotAllowed(DegrauError):
    """405: the route exists, not with this method."""

    type = "method_not_allowed"


class Conflict(DegrauError):
    """409: a stale ``head``, another round in progress, or a key in progress."""

    type = "conflict"


class PreconditionFailed(DegrauError):
    """412: ``If-Match`` names a tenant configuration version that is no longer the
    stored one (another change landed first); read it again and reapply."""

    type = "precondition_failed"


class TooLarge(DegrauError):
    """413: the body is over the route's limit."""

    type = "too_large"


class UnsupportedMediaType(DegrauError):
    """415: the body is not JSON."""

    type = "unsupported_media_type"


class IdempotencyMismatch(DegrauError):
    """422: the ``Idempotency-Key`` was used with another body."""

    type = "idempotency_mismatch"


class PreconditionRequired(DegrauError):
    """428: a change of the tenant configuration without ``If-Match``."""

    type = "precondition_required"


class RateLimited(DegrauError):
    """429: slow down (see ``retry_after``)."""

    type = "rate_limited"


class InternalError(DegrauError):
    """500: degrau failed; nothing was written."""

    type = "internal_error"


class TenantConfigInvalid(DegrauError):
    """500: the tenant's stored configuration does not read (written by hand into
    the table); every request of the tenant answers this until it is replaced
    (``put_tenant_config``, after ``get_tenant_config`` says why)."""

    type = "tenant_config_invalid"


class ModelError(DegrauError):
    """502: the model answered with an error."""

    type = "model_error"


class ModelRefused(DegrauError):
    """502: the model refused to answer."""

    type = "model_refused"


class Unavailable(DegrauError):
    """503: a dependency is unavailable (see ``retry_after``)."""

    type = "unavailable"


class ModelTimeout(DegrauError):
    """504: the model did not answer in time."""

    type = "model_timeout"


ERROR_CLASSES: dict[str, type[DegrauError]] = {
    cls.type: cls
    for cls in (
        InvalidRequest,
        Unauthenticated,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        Conflict,
        PreconditionFailed,
        TooLarge,
        UnsupportedMediaType,
        IdempotencyMismatch,
        PreconditionRequired,
        RateLimited,
        InternalError,
        TenantConfigInvalid,
        ModelError,
        ModelRefused,
        Unavailable,
        ModelTimeout,
    )
}


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A ``Retry-After`` header in seconds: its delta-seconds, or the time left
    until its HTTP date (0 when that has passed); None when absent or unreadable."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; a "-0000" zone parses naive
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


def error_from_body(status: int, body: Any, retry_after: float | None, text: str) -> DegrauError:
    """The exception for an error envelope ``body`` (or anything else, read as
    ``text``) answered with ``status``: the class of its ``error.type``. A streamed
    round's ``error`` event raises through it too, as the JSON route would."""
    kind, message = "unknown", text
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        kind = str(body["error"].get("type", kind))
        message = str(body["error"].get("message", message))
    cls = ERROR_CLASSES.get(kind, DegrauError)
    return cls(status, kind, message, retry_after, body)


def error_from_response(response: httpx.Response) -> DegrauError:
    """The exception for an error response (any status of 400 or more)."""
    body: Any
    try:
        body = response.json()
    except ValueError:
        body = response.text
    return error_from_body(
        response.status_code,
        body,
        retry_after_seconds(response.headers.get("retry-after")),
        response.text or response.reason_phrase,
    )

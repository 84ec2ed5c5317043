"""The errors the client raises, as the official SDKs shape theirs.

:class:`DegrauError` is the root of everything the client raises for a call:

- :class:`APIStatusError`: degrau (or API Gateway in front of it) answered an
  error. Every error degrau answers is ``{"error": {"type", "message"}}`` with a
  status; :func:`error_from_response` raises the class of its type (one per
  documented type, :data:`ERROR_CLASSES`), carrying the status, the type, the
  message, ``Retry-After`` (in seconds, from seconds or an HTTP date) and the
  request id.
- :class:`APIConnectionError`: no answer (the connection failed or broke off), and
  its subclass :class:`APITimeoutError` (an attempt timed out): raised once the
  retries are spent, the httpx error as its ``__cause__``.

Every error carries ``request_id``: the ``Request-Id`` degrau answered (the id its
logs carry for that request; API Gateway's own when degrau's is missing), ``None``
when no answer came.
"""

from __future__ import annotations

from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from ._schema import ERROR_TYPES as ERROR_TYPES

#: The headers a request id is read from, first found wins: degrau's own, then
#: those API Gateway adds (the HTTP API's, the REST API's).
REQUEST_ID_HEADERS = ("request-id", "apigw-requestid", "x-amzn-requestid")


def request_id_of(response: httpx.Response) -> str | None:
    """The request id an answer carries (:data:`REQUEST_ID_HEADERS`), if any."""
    return next((response.headers[h] for h in REQUEST_ID_HEADERS if h in response.headers), None)


class DegrauError(Exception):
    """Anything the client raises for a call: an error answer
    (:class:`APIStatusError`) or none (:class:`APIConnectionError`)."""

    def __init__(self, message: str, *, request_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        #: The request id of the answer (``None``: no answer came).
        self.request_id = request_id


class APIConnectionError(DegrauError):
    """No answer: the connection could not be made, or broke off before the
    answer was read (after the retries the policy allows)."""

    def __init__(self, message: str = "could not reach degrau") -> None:
        super().__init__(message)


class APITimeoutError(APIConnectionError):
    """An attempt timed out (the client's ``timeout``), after the retries."""

    def __init__(self, message: str = "degrau did not answer in time") -> None:
        super().__init__(message)


class APIStatusError(DegrauError):
    """An error answer of the degrau API (also raised for an unknown type, or an
    answer that is not degrau's envelope, such as API Gateway's own)."""

    type: str = "unknown"

    def __init__(
        self,
        status: int,
        type: str,
        message: str,
        retry_after: float | None = None,
        body: Any = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.args = (f"{status} {type}: {message}" + (f" (request id {request_id})" if request_id else ""),)
        self.status = status
        self.type = type
        self.retry_after = retry_after
        self.body = body


class InvalidRequest(APIStatusError):
    """400: the request is malformed or breaks a rule; nothing was written."""

    type = "invalid_request"


class Unauthenticated(APIStatusError):
    """401: no tenant (no token, or no ``X-Tenant-Id`` in dev mode)."""

    type = "unauthenticated"


class Forbidden(APIStatusError):
    """403: the token (or ``X-Scopes`` in dev mode) lacks the scope the operator
    route requires; nothing was read or written."""

    type = "forbidden"


class NotFound(APIStatusError):
    """404: no such route, or nothing stored under it (a contact, a fact)."""

    type = "not_found"


class MethodNotAllowed(APIStatusError):
    """405: the route exists, not with this method."""

    type = "method_not_allowed"


class Conflict(APIStatusError):
    """409: a stale ``head``, another round in progress, or a key in progress."""

    type = "conflict"


class PreconditionFailed(APIStatusError):
    """412: ``If-Match`` names a tenant configuration version that is no longer the
    stored one (another change landed first); read it again and reapply."""

    type = "precondition_failed"


class TooLarge(APIStatusError):
    """413: the body is over the route's limit."""

    type = "too_large"


class UnsupportedMediaType(APIStatusError):
    """415: the body is not JSON."""

    type = "unsupported_media_type"


class IdempotencyMismatch(APIStatusError):
    """422: the ``Idempotency-Key`` was used with another body."""

    type = "idempotency_mismatch"


class PreconditionRequired(APIStatusError):
    """428: a change of the tenant configuration without ``If-Match``."""

    type = "precondition_required"


class RateLimited(APIStatusError):
    """429: slow down (see ``retry_after``)."""

    type = "rate_limited"


class InternalError(APIStatusError):
    """500: degrau failed; nothing was written."""

    type = "internal_error"


class TenantConfigInvalid(APIStatusError):
    """500: the tenant's stored configuration does not read (written by hand into
    the table); every request of the tenant answers this until it is replaced
    (``put_tenant_config``, after ``get_tenant_config`` says why)."""

    type = "tenant_config_invalid"


class ModelError(APIStatusError):
    """502: the model answered with an error."""

    type = "model_error"


class ModelRefused(APIStatusError):
    """502: the model refused to answer."""

    type = "model_refused"


class Unavailable(APIStatusError):
    """503: a dependency is unavailable (see ``retry_after``)."""

    type = "unavailable"


class ModelTimeout(APIStatusError):
    """504: the model did not answer in time."""

    type = "model_timeout"


#: The class of each documented error type (``ERROR_TYPES``, generated from the
#: document: ``tests/test_errors.py`` holds the two to each other).
ERROR_CLASSES: dict[str, type[APIStatusError]] = {
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


def error_from_body(
    status: int, body: Any, retry_after: float | None, text: str, request_id: str | None = None
) -> APIStatusError:
    """The exception for an error envelope ``body`` (or anything else, read as
    ``text``) answered with ``status``: the class of its ``error.type``. A streamed
    round's ``error`` event raises through it too, as the JSON route would."""
    kind, message = "unknown", text
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        kind = str(body["error"].get("type", kind))
        message = str(body["error"].get("message", message))
    cls = ERROR_CLASSES.get(kind, APIStatusError)
    return cls(status, kind, message, retry_after, body, request_id)


def envelope_type(body: Any) -> str | None:
    """``error.type`` of degrau's envelope, or ``None`` when ``body`` is not one (an
    answer of API Gateway or a proxy)."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        kind = body["error"].get("type")
        return kind if isinstance(kind, str) else None
    return None


def error_from_response(response: httpx.Response) -> APIStatusError:
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
        request_id_of(response),
    )

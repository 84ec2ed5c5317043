"""What the sync and the async client share, free of I/O: the routes (each route's
method, path, params, body and key, built in one place), the reading of answers,
the retry policy and the settings.

A route is a *flow*: a generator that yields the :class:`Call` s to make and
receives each one's JSON answer (or has its error thrown in), returning the
method's result. Most flows make one call; ``transcript_messages`` walks the
pages. Each client drives the
flows with its own I/O (:meth:`DegrauClient._run`, :meth:`AsyncDegrauClient._run`).
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any, Literal, TypeVar, cast
from urllib.parse import quote

import httpx

from ._schema import RETRY_POLICY as RETRY_POLICY
from .errors import APIConnectionError, APITimeoutError, envelope_type, error_from_response, retry_after_seconds
from .models import (
    JSON,
    ContactPage,
    Context,
    FactDeleted,
    OperatorFact,
    RecordedRound,
    SessionClosed,
    SessionRecords,
    TenantConfigView,
    UsageReport,
    message_from,
    usage_from,
)

T = TypeVar("T")

#: A route: yields the calls to make, receives their answers, returns the result.
Flow = Generator["Call", Any, T]

Session = int | Literal["current", "all"] | None


@dataclass(frozen=True)
class Call:
    """One HTTP request of a route."""

    method: Literal["GET", "POST", "PUT", "DELETE"]
    path: str
    params: Mapping[str, str | int] = field(default_factory=dict)
    body: Any = None
    idempotency_key: str | None = None
    #: ``If-Match``: the version a conditional change replaces.
    if_match: str | None = None
    #: ``Accept``, when not the client's ``application/json``.
    accept: str | None = None

    def headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.idempotency_key is not None:
            headers["idempotency-key"] = self.idempotency_key
        if self.if_match is not None:
            headers["if-match"] = self.if_match
        if self.accept is not None:
            headers["accept"] = self.accept
        if self.body is not None:
            headers["content-type"] = "application/json"
        return headers

    def content(self) -> bytes | None:
        return None if self.body is None else json.dumps(self.body, ensure_ascii=False).encode()


def result(response: httpx.Response) -> Any:
    """The JSON of a success, or the error answer raised as its ``DegrauError``."""
    if response.status_code >= 400:
        raise error_from_response(response)
    return response.json()


def _contact(contact: str) -> str:
    return "/v1/contacts/" + quote(contact, safe="")


def send_message(contact: str, text: str, idempotency_key: str | None) -> Flow[JSON]:
    call = Call("POST", _contact(contact) + "/messages", body={"text": text}, idempotency_key=idempotency_key)
    return cast(JSON, (yield call))


def stream_message(contact: str, text: str, idempotency_key: str | None) -> Call:
    """The streaming route's request: ``send_message``'s body, answered as
    Server-Sent Events (the clients read it themselves: it is not a JSON flow).
    It always carries an ``Idempotency-Key`` (the caller's, else a uuid4), retries
    or not: a stream cut off mid-round is read again by replaying its key."""
    return Call(
        "POST",
        _contact(contact) + "/messages/stream",
        body={"text": text},
        idempotency_key=idempotency_key or str(uuid.uuid4()),
        accept="text/event-stream",
    )


def _transcript_params(session: Session, limit: int | None, before: str | None) -> dict[str, str | int]:
    params: dict[str, str | int] = {}
    if session is not None:
        params["session"] = session
    if limit is not None:
        params["limit"] = limit
    if before is not None:
        params["before"] = before
    return params


def transcript(contact: str, session: Session, limit: int | None, before: str | None) -> Flow[JSON]:
    call = Call("GET", _contact(contact) + "/messages", params=_transcript_params(session, limit, before))
    return cast(JSON, (yield call))


def transcript_messages(contact: str, session: Session) -> Flow[list[JSON]]:
    """Every page, newest first as the API walks them, returned oldest first."""
    pages: list[list[JSON]] = []
    before: str | None = None
    while True:
        page = yield from transcript(contact, session, None, before)
        pages.append(cast(list[JSON], page["messages"]))
        before = page.get("next_before")
        if not before:
            return [m for page in reversed(pages) for m in page]


def memory(contact: str) -> Flow[JSON]:
    return cast(JSON, (yield Call("GET", _contact(contact) + "/memory")))


def context(contact: str) -> Flow[Context]:
    return cast(Context, (yield Call("GET", _contact(contact) + "/context")))


def commit_round(
    contact: str, head: str, messages: Iterable[Any], usage: Any, idempotency_key: str | None
) -> Flow[RecordedRound]:
    body: JSON = {"head": head, "messages": [message_from(m) for m in messages]}
    if usage is not None:  # None: the client has none, and degrau estimates it
        body["usage"] = usage_from(usage)
    call = Call("POST", _contact(contact) + "/rounds", body=body, idempotency_key=idempotency_key)
    return cast(RecordedRound, (yield call))


def search_sessions(contact: str, q: str | None, limit: int | None) -> Flow[SessionRecords]:
    params: dict[str, str | int] = {}
    if q is not None:
        params["q"] = q
    if limit is not None:
        params["limit"] = limit
    call = Call("GET", _contact(contact) + "/sessions", params=params)
    return cast(SessionRecords, (yield call))


def close_session(contact: str) -> Flow[SessionClosed]:
    return cast(SessionClosed, (yield Call("POST", _contact(contact) + "/sessions")))


def erase(contact: str) -> Flow[JSON]:
    return cast(JSON, (yield Call("DELETE", _contact(contact))))


def list_contacts(limit: int | None, cursor: str | None) -> Flow[ContactPage]:
    params: dict[str, str | int] = {}
    if limit is not None:
        params["limit"] = limit
    if cursor is not None:
        params["cursor"] = cursor
    return cast(ContactPage, (yield Call("GET", "/v1/contacts", params=params)))


def list_facts(contact: str) -> Flow[list[OperatorFact]]:
    answer = yield Call("GET", _contact(contact) + "/facts")
    return cast(list[OperatorFact], answer["facts"])


def _fact(contact: str, key: str) -> str:
    return _contact(contact) + "/facts/" + quote(key, safe="")


def put_fact(contact: str, key: str, value: str) -> Flow[OperatorFact]:
    return cast(OperatorFact, (yield Call("PUT", _fact(contact, key), body={"value": value})))


def delete_fact(contact: str, key: str) -> Flow[FactDeleted]:
    return cast(FactDeleted, (yield Call("DELETE", _fact(contact, key))))


def get_tenant_config() -> Flow[TenantConfigView]:
    return cast(TenantConfigView, (yield Call("GET", "/v1/tenant/config")))


def put_tenant_config(config: Mapping[str, Any], etag: str) -> Flow[TenantConfigView]:
    call = Call("PUT", "/v1/tenant/config", body=dict(config), if_match=etag)
    return cast(TenantConfigView, (yield call))


def get_usage(from_: date | None, to: date | None) -> Flow[UsageReport]:
    params: dict[str, str | int] = {}
    if from_ is not None:
        params["from"] = from_.isoformat()
    if to is not None:
        params["to"] = to.isoformat()
    return cast(UsageReport, (yield Call("GET", "/v1/usage", params=params)))


def openapi() -> Flow[JSON]:
    return cast(JSON, (yield Call("GET", "/v1/openapi.json")))


#: The error types worth another attempt, by ``x-degrau-retry`` (docs/openapi.json,
#: the one policy of both clients): degrau wrote nothing, or the same
#: ``Idempotency-Key`` replays what it wrote.
RETRY_TYPES = frozenset(kind for kind, retry in RETRY_POLICY["error_types"].items() if retry)
#: The statuses worth another attempt when the answer is not degrau's envelope (API
#: Gateway's or a proxy's own).
RETRY_STATUSES_WITHOUT_ENVELOPE = frozenset(RETRY_POLICY["statuses_without_envelope"])
#: Failures before an answer that another attempt may not meet: the connection
#: (or the read of the answer) failed or timed out (``connection_errors``).
RETRY_ERRORS: tuple[type[Exception], ...] = (
    (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) if RETRY_POLICY["connection_errors"] else ()
)


def retryable_answer(response: httpx.Response) -> bool:
    """Whether the policy tries this error answer again: by its envelope's type, or
    by its status when it is not degrau's envelope."""
    try:
        kind = envelope_type(response.json())
    except ValueError:
        kind = None
    if kind is not None:
        return kind in RETRY_TYPES
    return response.status_code in RETRY_STATUSES_WITHOUT_ENVELOPE


def connection_error(error: httpx.TransportError) -> APIConnectionError:
    """The client's error for an httpx failure before an answer."""
    if isinstance(error, httpx.TimeoutException):
        return APITimeoutError(f"degrau did not answer in time: {error!r}")
    return APIConnectionError(f"could not reach degrau: {error!r}")


@dataclass(frozen=True)
class RetryPolicy:
    """How many times and for how long a call is tried again (``x-degrau-retry``).

    ``retries`` more attempts at most (0: none); no wait that would end past
    ``deadline`` seconds after the call began. The wait is the answer's
    ``Retry-After`` when it gave one, else exponential backoff with equal jitter:
    between half and all of ``backoff * 2**n`` (``n`` the retries so far), the step
    at most ``max_backoff``.
    """

    retries: int = RETRY_POLICY["max_retries"]
    deadline: float = RETRY_POLICY["deadline_seconds"]
    backoff: float = RETRY_POLICY["initial_backoff_seconds"]
    max_backoff: float = RETRY_POLICY["max_backoff_seconds"]
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        if self.retries < 0 or self.deadline < 0:
            raise ValueError("retries and deadline must be 0 or more")

    def start(self) -> Attempts:
        return Attempts(self, self.clock())


@dataclass
class Attempts:
    """The attempts of one call so far: decides whether and when to try again."""

    policy: RetryPolicy
    started: float
    retried: int = 0

    def _wait(self, retry_after: float | None) -> float | None:
        if self.retried >= self.policy.retries:
            return None
        if retry_after is None:
            step = min(self.policy.max_backoff, self.policy.backoff * 2**self.retried)
            retry_after = random.uniform(step / 2, step)
        if self.policy.clock() - self.started + retry_after > self.policy.deadline:
            return None
        self.retried += 1
        return retry_after

    def after_response(self, response: httpx.Response) -> float | None:
        """The seconds to wait before trying again, or None: this answer is final."""
        if response.status_code < 400 or not retryable_answer(response):
            return None
        return self._wait(retry_after_seconds(response.headers.get("retry-after")))

    def after_error(self, error: Exception) -> float | None:
        """The seconds to wait before trying again, or None: raise ``error``."""
        if not isinstance(error, RETRY_ERRORS):
            return None
        return self._wait(None)


#: A bearer token: the token itself, or a function that answers the current one
#: (called for every attempt, so a long-running worker gets a fresh Cognito token
#: when the last one expired, as the Anthropic SDK's ``api_key`` provider does).
TokenProvider = Callable[[], str]
#: The async client's: the function may also be a coroutine function.
AsyncTokenProvider = Callable[[], "str | Awaitable[str]"]


class Settings:
    """The settings both clients take, and what they make of a call."""

    def __init__(
        self,
        *,
        tenant: str | None,
        token: str | Callable[[], Any] | None,
        retries: int,
        deadline: float,
        clock: Callable[[], float] | None,
        scopes: str | Iterable[str] | None = None,
        operator: str | None = None,
    ) -> None:
        self.headers = {"accept": "application/json"}
        if tenant is not None:
            self.headers["x-tenant-id"] = tenant
        if scopes is not None:
            self.headers["x-scopes"] = scopes if isinstance(scopes, str) else " ".join(scopes)
        if operator is not None:
            self.headers["x-operator"] = operator
        #: The token's function, called for every attempt (``None``: a fixed token,
        #: in ``headers``, or none).
        self.token: Callable[[], Any] | None = None
        if isinstance(token, str):
            self.headers["authorization"] = f"Bearer {token}"
        elif token is not None:
            self.token = token
        self.retry = RetryPolicy(retries=retries, deadline=deadline, clock=clock or time.monotonic)

    def prepare(self, call: Call) -> Call:
        """``call`` as sent on every attempt: a POST without the caller's
        ``Idempotency-Key`` gets a fresh one (uuid4) when retries are on, so that
        trying it again replays its answer instead of doing it twice."""
        if call.method == "POST" and call.idempotency_key is None and self.retry.retries > 0:
            return replace(call, idempotency_key=str(uuid.uuid4()))
        return call


def bearer(token: str) -> dict[str, str]:
    """The header a token provider's answer is sent in."""
    if not isinstance(token, str) or not token:
        raise TypeError(f"the token provider answered {type(token).__name__}, not a token string")
    return {"authorization": f"Bearer {token}"}

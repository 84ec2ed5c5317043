"""The HTTP client: one method per route of degrau's API (``docs/openapi.json``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import date
from typing import Any, Literal, TypeVar, cast

import httpx

from . import _core
from .errors import error_from_response
from .models import (
    JSON,
    CacheCreation,
    ContactPage,
    ContactSummary,
    Context,
    FactDeleted,
    Message,
    OperatorFact,
    RecordedRound,
    RoundSpan,
    SessionClosed,
    SessionRecord,
    SessionRecords,
    TenantConfigView,
    Usage,
    UsageReport,
    message_from,
    usage_from,
)
from .streaming import EventReader, StreamEvent

__all__ = [
    "JSON",
    "CacheCreation",
    "Context",
    "DegrauClient",
    "Message",
    "RecordedRound",
    "RoundSpan",
    "SessionRecord",
    "SessionRecords",
    "Usage",
    "message_from",
    "usage_from",
]

T = TypeVar("T")


class DegrauClient:
    """A client of degrau's HTTP API.

    ``tenant`` sends ``X-Tenant-Id`` (the local stack's ``AUTH_MODE=dev``);
    ``token`` sends ``Authorization: Bearer`` (``AUTH_MODE=jwt`` behind API
    Gateway's JWT authorizer; the operator routes read their scopes from it): the
    token, or a function answering the current one, called for every attempt (a
    long-running worker's Cognito tokens last an hour: the function refreshes them).
    Under ``AUTH_MODE=dev`` the operator routes take the scopes from ``scopes``
    (``X-Scopes``: any of ``memory:read``, ``memory:write``, ``tenant:admin``, a
    string or an iterable) and the operator's id recorded on a fact it sets from
    ``operator`` (``X-Operator``; the server's default ``dev``).

    Errors: every error answer is raised as the
    :class:`~degrau_client.APIStatusError` subclass of its type; no answer (the
    connection failed, or an attempt timed out) as
    :class:`~degrau_client.APIConnectionError` (:class:`~degrau_client.APITimeoutError`);
    all are :class:`~degrau_client.DegrauError` s carrying the ``request_id``.

    Retries follow ``x-degrau-retry``, the one policy of degrau's clients
    (``docs/openapi.json``): a connection that failed or timed out, and the answers
    ``rate_limited``, ``unavailable``, ``internal_error`` and ``model_timeout`` (and
    a 429, 500, 502, 503 or 504 that is not degrau's envelope) are tried again up to
    ``retries`` times (0: never), waiting what ``Retry-After`` says (seconds or an
    HTTP date) or else an exponential backoff with equal jitter, and never waiting
    past ``deadline`` seconds after the call began; then the last error is raised.
    ``timeout`` bounds each attempt. Every POST is sent with an ``Idempotency-Key``
    (the caller's, or a uuid4 the client makes for that call when retries are on),
    the same on every attempt, so a retried POST is answered once. ``sleep`` and
    ``clock`` replace ``time.sleep`` and ``time.monotonic`` (tests).

    ``stream_base_url`` is where :meth:`stream_message` goes (on AWS the streaming
    route is served by an API of its own); by default ``base_url``, as the local
    stack serves it.
    """

    def __init__(
        self,
        base_url: str,
        *,
        stream_base_url: str | None = None,
        tenant: str | None = None,
        token: str | _core.TokenProvider | None = None,
        scopes: str | Iterable[str] | None = None,
        operator: str | None = None,
        timeout: float = 60.0,
        retries: int = _core.RETRY_POLICY["max_retries"],
        deadline: float = _core.RETRY_POLICY["deadline_seconds"],
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], object] = time.sleep,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._settings = _core.Settings(
            tenant=tenant,
            token=token,
            retries=retries,
            deadline=deadline,
            clock=clock,
            scopes=scopes,
            operator=operator,
        )
        self._sleep = sleep
        self._stream_base_url = (stream_base_url or base_url).rstrip("/")
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=self._settings.headers,
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> DegrauClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connections."""
        self._http.close()

    def _auth(self) -> dict[str, str]:
        """The token provider's current token as a header (none for a fixed token,
        which the client's headers carry)."""
        return {} if self._settings.token is None else _core.bearer(self._settings.token())

    def _send(self, call: _core.Call) -> Any:
        """One call, tried again as the retry policy says."""
        attempts = self._settings.retry.start()
        while True:
            headers = call.headers() | self._auth()
            try:
                response = self._http.request(
                    call.method, call.path, params=call.params, content=call.content(), headers=headers
                )
            except httpx.TransportError as error:
                wait = attempts.after_error(error)
                if wait is None:
                    raise _core.connection_error(error) from error
            else:
                wait = attempts.after_response(response)
                if wait is None:
                    return _core.result(response)
            self._sleep(wait)

    def _run(self, flow: _core.Flow[T]) -> T:
        """Makes the flow's calls, each one's answer (or error) handed back to it."""
        try:
            call = next(flow)
            while True:
                try:
                    answer = self._send(self._settings.prepare(call))
                except Exception as error:
                    call = flow.throw(error)
                else:
                    call = flow.send(answer)
        except StopIteration as done:
            return cast(T, done.value)

    def send_message(self, contact: str, text: str, *, idempotency_key: str | None = None) -> JSON:
        """``POST /v1/contacts/{contact}/messages``: degrau runs the model and the
        tools and commits the round."""
        return self._run(_core.send_message(contact, text, idempotency_key))

    def stream_message(self, contact: str, text: str, *, idempotency_key: str | None = None) -> Iterator[StreamEvent]:
        """``POST /v1/contacts/{contact}/messages/stream``: :meth:`send_message`'s
        round, its events as they happen: :class:`~degrau_client.TextDelta` s,
        :class:`~degrau_client.ToolStarted` / :class:`~degrau_client.ToolFinished`,
        :class:`~degrau_client.Restart` (forget what was shown), and last
        :class:`~degrau_client.Done`, whose ``response`` is what ``send_message``
        returns.

        The request goes when the iteration starts, always with an
        ``Idempotency-Key`` (the caller's, else a uuid4, even with ``retries=0``). An
        error before the stream began raises as ``send_message`` raises it, after
        the same retries (same key); once the stream began nothing is retried: an
        ``error`` event raises the class of its type, and a stream cut before
        ``done`` raises :class:`~degrau_client.StreamInterrupted` carrying the key to
        replay it with. ``timeout`` bounds each read, not the whole round. Leaving
        the loop early closes the connection; the round goes on and is stored.
        """
        call = _core.stream_message(contact, text, idempotency_key)
        response = self._open_stream(call)
        assert call.idempotency_key is not None  # _core.stream_message always sets one
        reader = EventReader(call.idempotency_key)
        try:
            try:
                for chunk in response.iter_bytes():
                    yield from reader.feed(chunk)
                    if reader.done:
                        return
            except httpx.TransportError as error:
                raise reader.interrupted(f"the stream broke off: {error!r}") from error
            reader.end()
        finally:
            response.close()

    def _open_stream(self, call: _core.Call) -> httpx.Response:
        """The streaming route's answer with its body unread, once it is a success;
        an error answer or a failed connection is retried as :meth:`_send` does."""
        attempts = self._settings.retry.start()
        while True:
            request = self._http.build_request(
                call.method,
                self._stream_base_url + call.path,
                content=call.content(),
                headers=call.headers() | self._auth(),
            )
            try:
                response = self._http.send(request, stream=True)
            except httpx.TransportError as error:
                wait = attempts.after_error(error)
                if wait is None:
                    raise _core.connection_error(error) from error
            else:
                if response.status_code < 400:
                    return response
                try:
                    response.read()
                finally:
                    response.close()
                wait = attempts.after_response(response)
                if wait is None:
                    raise error_from_response(response)
            self._sleep(wait)

    def transcript(
        self,
        contact: str,
        *,
        session: int | Literal["current", "all"] | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> JSON:
        """``GET /v1/contacts/{contact}/messages``: one page, oldest first."""
        return self._run(_core.transcript(contact, session, limit, before))

    def transcript_messages(
        self, contact: str, *, session: int | Literal["current", "all"] | None = None
    ) -> list[JSON]:
        """Every message of the transcript (all pages), oldest first."""
        return self._run(_core.transcript_messages(contact, session))

    def memory(self, contact: str) -> JSON:
        """``GET /v1/contacts/{contact}/memory``: the session, summary and facts."""
        return self._run(_core.memory(contact))

    def context(self, contact: str) -> Context:
        """``GET /v1/contacts/{contact}/context``: the ``system`` blocks and the
        window's ``messages`` the next model request should carry, and the
        ``head`` to commit the round on."""
        return self._run(_core.context(contact))

    def commit_round(
        self,
        contact: str,
        head: str,
        messages: Iterable[Message | JSON | Any],
        usage: Usage | Mapping[str, Any] | Any | None,
        *,
        idempotency_key: str | None = None,
    ) -> RecordedRound:
        """``POST /v1/contacts/{contact}/rounds``: commits a round the caller ran
        itself (the user message, the assistant replies and the tool results), with
        the last model call's usage. A stale ``head`` raises
        :class:`~degrau_client.Conflict`.

        ``usage`` may be the SDK's ``response.usage`` or a mapping as the API
        returns it (see :func:`~degrau_client.usage_from`), or ``None`` when the
        caller has none: degrau then estimates the context from what it holds
        (``usage_estimated`` in the answer), so compaction still happens. A
        message's content may hold the SDK's blocks (``response.content``), see
        :func:`~degrau_client.message_from`."""
        return self._run(_core.commit_round(contact, head, messages, usage, idempotency_key))

    def search_sessions(self, contact: str, q: str | None = None, *, limit: int | None = None) -> SessionRecords:
        """``GET /v1/contacts/{contact}/sessions``: the records of the contact's
        earlier sessions (recall), those matching ``q`` best first, or the newest
        first without it; at most ``limit`` (1 to 20, default 5)."""
        return self._run(_core.search_sessions(contact, q, limit))

    def close_session(self, contact: str) -> SessionClosed:
        """``POST /v1/contacts/{contact}/sessions``: closes the contact's session now,
        as its idle timeout would (its record kept, its facts extracted); the next
        round opens a new session, which starts with the facts and no window or
        summary. Nothing is erased (see :meth:`erase`). Closing a session with no
        message closes nothing (``closed_session`` is ``None``), so repeating it is
        safe."""
        return self._run(_core.close_session(contact))

    def erase(self, contact: str) -> JSON:
        """``DELETE /v1/contacts/{contact}``: erases everything stored about it
        (transcript, summaries, records, facts), for good."""
        return self._run(_core.erase(contact))

    def list_contacts(self, *, limit: int | None = None, cursor: str | None = None) -> ContactPage:
        """``GET /v1/contacts`` (scope ``memory:read``): one page of the tenant's
        contacts, most recently active first; pass its ``next_cursor`` as
        ``cursor`` for the next."""
        return self._run(_core.list_contacts(limit, cursor))

    def iter_contacts(self, *, limit: int | None = None) -> Iterator[ContactSummary]:
        """Every contact of the tenant, most recently active first, reading the
        pages (``limit`` contacts each) as the iteration reaches them."""
        cursor: str | None = None
        while True:
            page = self.list_contacts(limit=limit, cursor=cursor)
            yield from page["contacts"]
            cursor = page["next_cursor"]
            if not cursor:
                return

    def list_facts(self, contact: str) -> list[OperatorFact]:
        """``GET /v1/contacts/{contact}/facts`` (scope ``memory:read``): the facts
        with who set each (the model at which message, or an operator), when, when
        it expires, and its earlier values."""
        return self._run(_core.list_facts(contact))

    def put_fact(self, contact: str, key: str, value: str) -> OperatorFact:
        """``PUT /v1/contacts/{contact}/facts/{key}`` (scope ``memory:write``): sets
        or corrects a fact as an operator, under the tenant's fact policy (a key
        not allowed, or a value it refuses, raises
        :class:`~degrau_client.InvalidRequest` naming the rule). A later extraction
        replaces it only citing a later message."""
        return self._run(_core.put_fact(contact, key, value))

    def delete_fact(self, contact: str, key: str) -> FactDeleted:
        """``DELETE /v1/contacts/{contact}/facts/{key}`` (scope ``memory:write``):
        the fact and its earlier values."""
        return self._run(_core.delete_fact(contact, key))

    def get_tenant_config(self) -> TenantConfigView:
        """``GET /v1/tenant/config`` (scope ``tenant:admin``): the stored
        configuration, its ``etag``, and whether it reads (``valid``,
        ``problem``)."""
        return self._run(_core.get_tenant_config())

    def put_tenant_config(self, config: Mapping[str, Any], etag: str) -> TenantConfigView:
        """``PUT /v1/tenant/config`` (scope ``tenant:admin``): replaces the
        configuration, validated in full first, if ``etag`` (from
        :meth:`get_tenant_config`, ``'"v0"'`` when none is stored) is still the
        stored version; else :class:`~degrau_client.PreconditionFailed`: read it
        again and reapply. An invalid one raises
        :class:`~degrau_client.InvalidRequest` naming the entry and the field.
        (A retry of a change that landed before its answer was lost also gets
        ``PreconditionFailed``: read the configuration to see which won.)"""
        return self._run(_core.put_tenant_config(config, etag))

    def get_usage(self, from_: date | None = None, to: date | None = None) -> UsageReport:
        """``GET /v1/usage`` (scope ``tenant:admin``): the tenant's consumption per
        UTC day from ``from_`` to ``to`` inclusive (the server's default: the
        last seven days), with the cost at the deployment's prices."""
        return self._run(_core.get_usage(from_, to))

    def openapi(self) -> JSON:
        """``GET /v1/openapi.json``: the API's OpenAPI 3.1 description."""
        return self._run(_core.openapi())

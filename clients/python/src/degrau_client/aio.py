"""The asyncio (and trio) client: :class:`DegrauClient`'s methods, arguments,
results, errors and retries, on ``httpx.AsyncClient``. The routes, the reading of
answers and the retry policy are the sync client's (``_core``); only the I/O
differs."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from datetime import date
from typing import Any, Literal, TypeVar, cast

import anyio
import httpx

from . import _core
from .errors import error_from_response
from .models import (
    JSON,
    ContactPage,
    ContactSummary,
    Context,
    FactDeleted,
    Message,
    OperatorFact,
    RecordedRound,
    SessionClosed,
    SessionRecords,
    TenantConfigView,
    Usage,
    UsageReport,
)
from .streaming import EventReader, StreamEvent

T = TypeVar("T")


class AsyncDegrauClient:
    """An async client of degrau's HTTP API: the same methods as
    :class:`~degrau_client.DegrauClient`, awaited, with the same arguments,
    results, errors and retries (see there). ``async with`` closes it, or
    ``await client.aclose()``. ``token`` may also be a coroutine function answering
    the current token. ``sleep`` (awaited; ``anyio.sleep``, which serves asyncio and
    trio) and ``clock`` are for tests.
    """

    def __init__(
        self,
        base_url: str,
        *,
        stream_base_url: str | None = None,
        tenant: str | None = None,
        token: str | _core.AsyncTokenProvider | None = None,
        scopes: str | Iterable[str] | None = None,
        operator: str | None = None,
        timeout: float = 60.0,
        retries: int = _core.RETRY_POLICY["max_retries"],
        deadline: float = _core.RETRY_POLICY["deadline_seconds"],
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[object]] = anyio.sleep,
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
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers=self._settings.headers,
            timeout=timeout,
            transport=transport,
        )

    async def __aenter__(self) -> AsyncDegrauClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the connections."""
        await self._http.aclose()

    async def _auth(self) -> dict[str, str]:
        """The token provider's current token as a header, awaited when the provider
        is a coroutine function (none for a fixed token, in the client's headers)."""
        if self._settings.token is None:
            return {}
        token = self._settings.token()
        return _core.bearer(await token if inspect.isawaitable(token) else token)

    async def _send(self, call: _core.Call) -> Any:
        """One call, tried again as the retry policy says."""
        attempts = self._settings.retry.start()
        while True:
            headers = call.headers() | await self._auth()
            try:
                response = await self._http.request(
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
            await self._sleep(wait)

    async def _run(self, flow: _core.Flow[T]) -> T:
        """Makes the flow's calls, each one's answer (or error) handed back to it."""
        try:
            call = next(flow)
            while True:
                try:
                    answer = await self._send(self._settings.prepare(call))
                except Exception as error:
                    call = flow.throw(error)
                else:
                    call = flow.send(answer)
        except StopIteration as done:
            return cast(T, done.value)

    async def send_message(self, contact: str, text: str, *, idempotency_key: str | None = None) -> JSON:
        """``POST /v1/contacts/{contact}/messages``: degrau runs the model and the
        tools and commits the round."""
        return await self._run(_core.send_message(contact, text, idempotency_key))

    async def stream_message(
        self, contact: str, text: str, *, idempotency_key: str | None = None
    ) -> AsyncIterator[StreamEvent]:
        """``POST /v1/contacts/{contact}/messages/stream``: the round's events as
        they happen, as :meth:`DegrauClient.stream_message <degrau_client.DegrauClient.stream_message>`
        (``async for``). An async generator left early closes its connection when it
        is closed: ``contextlib.aclosing`` makes that prompt."""
        call = _core.stream_message(contact, text, idempotency_key)
        response = await self._open_stream(call)
        assert call.idempotency_key is not None  # _core.stream_message always sets one
        reader = EventReader(call.idempotency_key)
        try:
            try:
                async for chunk in response.aiter_bytes():
                    for event in reader.feed(chunk):
                        yield event
                    if reader.done:
                        return
            except httpx.TransportError as error:
                raise reader.interrupted(f"the stream broke off: {error!r}") from error
            reader.end()
        finally:
            await response.aclose()

    async def _open_stream(self, call: _core.Call) -> httpx.Response:
        """The streaming route's answer with its body unread, once it is a success;
        an error answer or a failed connection is retried as :meth:`_send` does."""
        attempts = self._settings.retry.start()
        while True:
            request = self._http.build_request(
                call.method,
                self._stream_base_url + call.path,
                content=call.content(),
                headers=call.headers() | await self._auth(),
            )
            try:
                response = await self._http.send(request, stream=True)
            except httpx.TransportError as error:
                wait = attempts.after_error(error)
                if wait is None:
                    raise _core.connection_error(error) from error
            else:
                if response.status_code < 400:
                    return response
                try:
                    await response.aread()
                finally:
                    await response.aclose()
                wait = attempts.after_response(response)
                if wait is None:
                    raise error_from_response(response)
            await self._sleep(wait)

    async def transcript(
        self,
        contact: str,
        *,
        session: int | Literal["current", "all"] | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> JSON:
        """``GET /v1/contacts/{contact}/messages``: one page, oldest first."""
        return await self._run(_core.transcript(contact, session, limit, before))

    async def transcript_messages(
        self, contact: str, *, session: int | Literal["current", "all"] | None = None
    ) -> list[JSON]:
        """Every message of the transcript (all pages), oldest first."""
        return await self._run(_core.transcript_messages(contact, session))

    async def memory(self, contact: str) -> JSON:
        """``GET /v1/contacts/{contact}/memory``: the session, summary and facts."""
        return await self._run(_core.memory(contact))

    async def context(self, contact: str) -> Context:
        """``GET /v1/contacts/{contact}/context``: the ``system`` blocks and the
        window's ``messages`` the next model request should carry, and the
        ``head`` to commit the round on."""
        return await self._run(_core.context(contact))

    async def commit_round(
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
        return await self._run(_core.commit_round(contact, head, messages, usage, idempotency_key))

    async def search_sessions(self, contact: str, q: str | None = None, *, limit: int | None = None) -> SessionRecords:
        """``GET /v1/contacts/{contact}/sessions``: the records of the contact's
        earlier sessions (recall), those matching ``q`` best first, or the newest
        first without it; at most ``limit`` (1 to 20, default 5)."""
        return await self._run(_core.search_sessions(contact, q, limit))

    async def close_session(self, contact: str) -> SessionClosed:
        """``POST /v1/contacts/{contact}/sessions``: closes the contact's session now,
        as its idle timeout would (its record kept, its facts extracted); the next
        round opens a new session, which starts with the facts and no window or
        summary. Nothing is erased (see :meth:`erase`). Closing a session with no
        message closes nothing (``closed_session`` is ``None``), so repeating it is
        safe."""
        return await self._run(_core.close_session(contact))

    async def erase(self, contact: str) -> JSON:
        """``DELETE /v1/contacts/{contact}``: erases everything stored about it
        (transcript, summaries, records, facts), for good."""
        return await self._run(_core.erase(contact))

    async def list_contacts(self, *, limit: int | None = None, cursor: str | None = None) -> ContactPage:
        """``GET /v1/contacts`` (scope ``memory:read``): one page of the tenant's
        contacts, most recently active first; pass its ``next_cursor`` as
        ``cursor`` for the next."""
        return await self._run(_core.list_contacts(limit, cursor))

    async def iter_contacts(self, *, limit: int | None = None) -> AsyncIterator[ContactSummary]:
        """Every contact of the tenant, most recently active first, reading the
        pages (``limit`` contacts each) as the iteration reaches them."""
        cursor: str | None = None
        while True:
            page = await self.list_contacts(limit=limit, cursor=cursor)
            for contact in page["contacts"]:
                yield contact
            cursor = page["next_cursor"]
            if not cursor:
                return

    async def list_facts(self, contact: str) -> list[OperatorFact]:
        """``GET /v1/contacts/{contact}/facts`` (scope ``memory:read``): the facts
        with who set each (the model at which message, or an operator), when, when
        it expires, and its earlier values."""
        return await self._run(_core.list_facts(contact))

    async def put_fact(self, contact: str, key: str, value: str) -> OperatorFact:
        """``PUT /v1/contacts/{contact}/facts/{key}`` (scope ``memory:write``): sets
        or corrects a fact as an operator, under the tenant's fact policy (a key
        not allowed, or a value it refuses, raises
        :class:`~degrau_client.InvalidRequest` naming the rule). A later extraction
        replaces it only citing a later message."""
        return await self._run(_core.put_fact(contact, key, value))

    async def delete_fact(self, contact: str, key: str) -> FactDeleted:
        """``DELETE /v1/contacts/{contact}/facts/{key}`` (scope ``memory:write``):
        the fact and its earlier values."""
        return await self._run(_core.delete_fact(contact, key))

    async def get_tenant_config(self) -> TenantConfigView:
        """``GET /v1/tenant/config`` (scope ``tenant:admin``): the stored
        configuration, its ``etag``, and whether it reads (``valid``,
        ``problem``)."""
        return await self._run(_core.get_tenant_config())

    async def put_tenant_config(self, config: Mapping[str, Any], etag: str) -> TenantConfigView:
        """``PUT /v1/tenant/config`` (scope ``tenant:admin``): replaces the
        configuration, validated in full first, if ``etag`` (from
        :meth:`get_tenant_config`, ``'"v0"'`` when none is stored) is still the
        stored version; else :class:`~degrau_client.PreconditionFailed`: read it
        again and reapply. An invalid one raises
        :class:`~degrau_client.InvalidRequest` naming the entry and the field.
        (A retry of a change that landed before its answer was lost also gets
        ``PreconditionFailed``: read the configuration to see which won.)"""
        return await self._run(_core.put_tenant_config(config, etag))

    async def get_usage(self, from_: date | None = None, to: date | None = None) -> UsageReport:
        """``GET /v1/usage`` (scope ``tenant:admin``): the tenant's consumption per
        UTC day from ``from_`` to ``to`` inclusive (the server's default: the
        last seven days), with the cost at the deployment's prices."""
        return await self._run(_core.get_usage(from_, to))

    async def openapi(self) -> JSON:
        """``GET /v1/openapi.json``: the API's OpenAPI 3.1 description."""
        return await self._run(_core.openapi())

"""The HTTP client: one method per route of degrau's API (``docs/openapi.json``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypedDict, cast
from urllib.parse import quote

import httpx

from .errors import error_from_response

JSON = dict[str, Any]


class Usage(TypedDict, total=False):
    """A model call's usage, as the Messages API reports it."""

    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int | None
    cache_creation_input_tokens: int | None


class Message(TypedDict):
    """A message in the Messages API shape."""

    role: Literal["user", "assistant"]
    content: str | list[JSON]


class Context(TypedDict):
    """What the contact's next model request should carry."""

    session: int
    head: str
    opens_session: bool
    system: list[JSON]
    messages: list[Message]
    #: The breakpoint for the last block of the message you append (with
    #: ``"ttl": "1h"`` when the tenant's cache policy chose an hour).
    cache_control: JSON


class RoundSpan(TypedDict):
    first_seq: int
    last_seq: int


class RecordedRound(TypedDict):
    """A committed round."""

    session: int
    round: RoundSpan
    usage: JSON
    compaction_queued: bool


_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def usage_from(usage: Any) -> Usage:
    """The four counts ``rounds`` takes, from an SDK usage object or a mapping
    (the SDK's other fields, such as ``cache_creation`` or ``service_tier``, are
    left out)."""
    out: dict[str, int] = {}
    for name in _USAGE_FIELDS:
        value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
        if value is not None:
            out[name] = int(value)
    out.setdefault("input_tokens", 0)
    out.setdefault("output_tokens", 0)
    return cast(Usage, out)


class DegrauClient:
    """A client of degrau's HTTP API.

    ``tenant`` sends ``X-Tenant-Id`` (the local stack's ``AUTH_MODE=dev``);
    ``token`` sends ``Authorization: Bearer`` (``AUTH_MODE=jwt`` behind API
    Gateway's JWT authorizer). Every error answer is raised as the
    :class:`~degrau_client.DegrauError` subclass of its type.
    """

    def __init__(
        self,
        base_url: str,
        *,
        tenant: str | None = None,
        token: str | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"accept": "application/json"}
        if tenant is not None:
            headers["x-tenant-id"] = tenant
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=headers,
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

    @staticmethod
    def _contact(contact: str) -> str:
        return "/v1/contacts/" + quote(contact, safe="")

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str | int] | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        headers: dict[str, str] = {}
        if idempotency_key is not None:
            headers["idempotency-key"] = idempotency_key
        content = None
        if body is not None:
            content = json.dumps(body, ensure_ascii=False).encode()
            headers["content-type"] = "application/json"
        response = self._http.request(
            method, path, content=content, params=params, headers=headers
        )
        if response.status_code >= 400:
            raise error_from_response(response)
        return response.json()

    def send_message(
        self, contact: str, text: str, *, idempotency_key: str | None = None
    ) -> JSON:
        """``POST /v1/contacts/{contact}/messages``: degrau runs the model and the
        tools and commits the round."""
        return cast(
            JSON,
            self._call(
                "POST",
                self._contact(contact) + "/messages",
                body={"text": text},
                idempotency_key=idempotency_key,
            ),
        )

    def transcript(
        self,
        contact: str,
        *,
        session: int | Literal["current", "all"] | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> JSON:
        """``GET /v1/contacts/{contact}/messages``: one page, oldest first."""
        params: dict[str, str | int] = {}
        if session is not None:
            params["session"] = session
        if limit is not None:
            params["limit"] = limit
        if before is not None:
            params["before"] = before
        return cast(
            JSON, self._call("GET", self._contact(contact) + "/messages", params=params)
        )

    def transcript_messages(
        self, contact: str, *, session: int | Literal["current", "all"] | None = None
    ) -> list[JSON]:
        """Every message of the transcript (all pages), oldest first."""
        pages: list[list[JSON]] = []
        before: str | None = None
        while True:
            page = self.transcript(contact, session=session, before=before)
            pages.append(page["messages"])
            before = page.get("next_before")
            if not before:
                break
        return [m for page in reversed(pages) for m in page]

    def memory(self, contact: str) -> JSON:
        """``GET /v1/contacts/{contact}/memory``: the session, summary and facts."""
        return cast(JSON, self._call("GET", self._contact(contact) + "/memory"))

    def context(self, contact: str) -> Context:
        """``GET /v1/contacts/{contact}/context``: the ``system`` blocks and the
        window's ``messages`` the next model request should carry, and the
        ``head`` to commit the round on."""
        return cast(Context, self._call("GET", self._contact(contact) + "/context"))

    def commit_round(
        self,
        contact: str,
        head: str,
        messages: Iterable[Message | JSON],
        usage: Usage | Mapping[str, Any] | Any,
        *,
        idempotency_key: str | None = None,
    ) -> RecordedRound:
        """``POST /v1/contacts/{contact}/rounds``: commits a round the caller ran
        itself (the user message, the assistant replies and the tool results), with
        the last model call's usage. A stale ``head`` raises
        :class:`~degrau_client.Conflict`."""
        body = {"head": head, "messages": list(messages), "usage": usage_from(usage)}
        return cast(
            RecordedRound,
            self._call(
                "POST",
                self._contact(contact) + "/rounds",
                body=body,
                idempotency_key=idempotency_key,
            ),
        )

    def erase(self, contact: str) -> JSON:
        """``DELETE /v1/contacts/{contact}``: erases everything stored about it."""
        return cast(JSON, self._call("DELETE", self._contact(contact)))

    def openapi(self) -> JSON:
        """``GET /v1/openapi.json``: the API's OpenAPI 3.1 description."""
        return cast(JSON, self._call("GET", "/v1/openapi.json"))

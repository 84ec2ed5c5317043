"""The shapes the API sends and takes, and the conversions from the Anthropic SDK's
objects (``response.usage``, ``response.content``) to them.

The conversions duck-type the SDK (``model_dump``) instead of importing it: the
client does not depend on ``anthropic`` or ``pydantic``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypedDict, cast

JSON = dict[str, Any]


class CacheCreation(TypedDict, total=False):
    """``usage.cache_creation``: the cache writes by entry lifetime."""

    ephemeral_5m_input_tokens: int
    ephemeral_1h_input_tokens: int


class Usage(TypedDict, total=False):
    """A model call's usage, as the Messages API reports it (the fields ``rounds``
    takes)."""

    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int | None
    cache_creation_input_tokens: int | None
    cache_creation: CacheCreation


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


class ContactSummary(TypedDict):
    """A contact in ``GET /v1/contacts``."""

    contact: str
    #: The current (or last) session's number.
    session: int
    #: Unix seconds of the last round.
    last_activity: int
    #: Messages stored in the current session.
    messages: int
    facts: int


class ContactPage(TypedDict):
    """One page of the tenant's contacts, most recently active first."""

    contacts: list[ContactSummary]
    #: Pass as ``cursor`` for the next page; None on the last.
    next_cursor: str | None


class SetBy(TypedDict, total=False):
    """Who set a fact's value: ``kind`` ``"model"`` (the extraction, citing the
    ``session`` and ``seq`` of the message it read) or ``"operator"`` (``by``: the
    operator's id; ``session`` and ``seq``: the contact's last message then)."""

    kind: Literal["model", "operator"]
    by: str
    session: int
    seq: int


class FactRevision(TypedDict):
    """An earlier value of a fact."""

    value: str
    set_by: SetBy
    updated_at: int
    replaced_at: int


class OperatorFact(TypedDict):
    """A fact with its provenance and its earlier values (newest first)."""

    key: str
    value: str
    set_by: SetBy
    updated_at: int
    #: Unix seconds it expires (the fact retention after its last change).
    expires_at: int | None
    history: list[FactRevision]


class FactDeleted(TypedDict):
    deleted: bool
    key: str


class TenantConfigView(TypedDict):
    """The tenant's stored configuration (None: every setting is the deployment's
    default), its version, and whether it reads (``problem`` says why not)."""

    config: JSON | None
    #: Send it back to :meth:`~degrau_client.DegrauClient.put_tenant_config`.
    etag: str
    valid: bool
    problem: str | None


class ModelTokens(TypedDict):
    """Tokens one model read and wrote in a day, by kind, and their cost (None
    when the deployment's price table has no price for the model)."""

    model: str
    input: int
    cache_write_5m: int
    cache_write_1h: int
    cache_read: int
    output: int
    cost_usd: float | None


class UsageDay(TypedDict):
    """One UTC day of a tenant's consumption."""

    day: str
    rounds: int
    model_calls: int
    tool_calls: int
    summary_calls: int
    facts_calls: int
    whatsapp_in: int
    whatsapp_out: int
    tokens: list[ModelTokens]
    cost_usd: float | None


#: ``GET /v1/usage``: the days of ``from``..``to`` (UTC, inclusive) that had any
#: consumption. (Named apart from :class:`Usage`, a model call's usage, which
#: rounds take; ``from`` being a keyword, the functional form.)
UsageReport = TypedDict("UsageReport", {"from": str, "to": str, "days": list[UsageDay]})


class Passage(TypedDict):
    """A stretch of a session around a line that matched a search."""

    #: The day the matching line was written (``YYYY-MM-DD``, UTC).
    date: str
    #: ``customer: …``, ``agent: …`` or ``tool: …`` lines, in order.
    lines: list[str]


class SessionRecord(TypedDict, total=False):
    """A closed session: its record, and with a query its score, search summary
    and the passages that matched (recall)."""

    session: int
    #: The summary the session's last compaction step left (absent when none ran).
    summary: str
    #: The messages after the summary as ``customer:``/``agent:`` lines.
    excerpt: str
    #: Booking numbers, codes and dates found in the session.
    ids: list[str]
    messages: int
    #: When its last round was, seconds since the Unix epoch.
    ended_at: int
    #: Its BM25 score for the query (only with ``q``).
    score: float
    #: The index card the summary model wrote of the session (with ``q``, once written).
    search_summary: str
    #: The lines that matched the query, with their neighbours, dated (with ``q``).
    passages: list[Passage]


class SessionRecords(TypedDict):
    """``GET /v1/contacts/{contact}/sessions``: best match first with a query,
    newest first without."""

    sessions: list[SessionRecord]


_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
_SPLIT = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")


def _as_mapping(value: Any) -> Mapping[str, Any] | None:
    """A mapping, a pydantic model (the SDK's objects) dumped, or None for
    anything else."""
    if isinstance(value, Mapping):
        return cast(Mapping[str, Any], value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return cast(Mapping[str, Any], dump(mode="json", exclude_none=True))
    return None


def _fields(value: Any) -> Callable[[str], Any]:
    """A reader of ``value``'s fields: ``value[name]`` of a mapping or an SDK model
    (dumped once), ``value.name`` of another object; None when absent."""
    mapping = _as_mapping(value)
    if mapping is not None:
        return mapping.get
    return lambda name: getattr(value, name, None)


def usage_from(usage: Any) -> Usage:
    """The usage ``rounds`` takes, from the SDK's ``Usage`` (``response.usage``), a
    mapping as the Messages API returns it, or any object with those attributes.

    Kept: the four counts (``null`` ones left out; the two required ones 0 when
    missing) and ``cache_creation``, the 5-minute / 1-hour split of the cache
    writes, when present. The API's other fields (``service_tier``,
    ``server_tool_use``, ...) are left out: degrau does not use them.
    """
    field = _fields(usage)
    out: dict[str, Any] = {}
    for name in _COUNTS:
        value = field(name)
        if value is not None:
            out[name] = int(value)
    out.setdefault("input_tokens", 0)
    out.setdefault("output_tokens", 0)
    split = field("cache_creation")
    if split is not None:
        split_field = _fields(split)
        out["cache_creation"] = {name: int(split_field(name) or 0) for name in _SPLIT}
    return cast(Usage, out)


def _block(block: Any) -> Any:
    mapping = _as_mapping(block)
    return dict(mapping) if mapping is not None else block


def message_from(message: Any) -> JSON:
    """A round's message in the Messages API shape, from a mapping
    ``{"role", "content"}`` whose content blocks may be the SDK's objects (as in
    ``{"role": "assistant", "content": response.content}``), or from an SDK
    object with ``role`` and ``content`` (the ``Message`` ``messages.create``
    returns: only those two fields are kept).

    SDK blocks are dumped without their ``None`` fields (such as a text block's
    ``citations: None``); mappings are sent as they are.
    """
    if isinstance(message, Mapping):
        out = dict(cast(Mapping[str, Any], message))
    else:
        dumped = _as_mapping(message)
        if dumped is None:
            raise TypeError(f"a round's message is a mapping or an SDK message, not {type(message).__name__}")
        out = {"role": dumped.get("role"), "content": dumped.get("content")}
    content = out.get("content")
    if isinstance(content, Iterable) and not isinstance(content, (str, bytes, Mapping)):
        out["content"] = [_block(b) for b in content]
    return out

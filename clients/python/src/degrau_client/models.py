"""The shapes the API sends and takes, and the conversions from the Anthropic SDK's
objects (``response.usage``, ``response.content``) to them.

The conversions duck-type the SDK (``model_dump``) instead of importing it: the
client does not depend on ``anthropic`` or ``pydantic``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict, cast

from ._schema import (
    JSON,
    ApiUsage,
    ContactPage,
    ContactSummary,
    FactDeleted,
    FactRevision,
    ModelTokens,
    OperatorFact,
    Passage,
    RecordedRound,
    RoundMessage,
    RoundSpan,
    SessionClosed,
    SessionRecord,
    SessionRecords,
    SetBy,
    TenantConfigView,
    UsageDay,
)
from ._schema import ContextView as Context
from ._schema import Usage as UsageReport

__all__ = [
    "JSON",
    "CacheCreation",
    "ContactPage",
    "ContactSummary",
    "Context",
    "FactDeleted",
    "FactRevision",
    "Message",
    "ModelTokens",
    "OperatorFact",
    "Passage",
    "RecordedRound",
    "RoundSpan",
    "SessionClosed",
    "SessionRecord",
    "SessionRecords",
    "SetBy",
    "TenantConfigView",
    "Usage",
    "UsageDay",
    "UsageReport",
    "message_from",
    "usage_from",
]

# The API's shapes are generated from docs/openapi.json (``_schema.py``); the names
# here are the client's: ``Context`` is ``ContextView``, ``Usage`` a model call's
# usage (``ApiUsage``, what ``rounds`` takes), ``UsageReport`` the tenant's
# ``GET /v1/usage`` (the document's ``Usage``).

#: A model call's usage, as the Messages API reports it (the fields ``rounds`` takes).
Usage = ApiUsage
#: A message in the Messages API shape, as a round holds it.
Message = RoundMessage


class CacheCreation(TypedDict, total=False):
    """``usage.cache_creation``: the cache writes by entry lifetime."""

    ephemeral_5m_input_tokens: int
    ephemeral_1h_input_tokens: int


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

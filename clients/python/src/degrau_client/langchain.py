"""A LangChain chat message history backed by degrau.

``DegrauChatMessageHistory(client, contact)``:

- ``messages`` reads the current session's transcript (empty when the next round
  opens a new session: a new contact, or a session gone idle) as LangChain
  messages: user text as ``HumanMessage``, assistant replies as ``AIMessage`` (their
  ``tool_use`` blocks as ``tool_calls``), tool results as ``ToolMessage``.
- ``add_messages`` commits a round (``context`` then ``rounds``) for each
  ``HumanMessage`` followed by the ``AIMessage`` answering it, with the usage
  LangChain gives (``usage_metadata``) when present. A human message without its
  reply waits in memory for it (``add_user_message`` then ``add_ai_message`` is
  one round).
- ``clear`` erases the contact (everything degrau stores about it; a contact
  never seen is already clear).

What it cannot express: a round with tool calls (LangChain hands the history
``AIMessage`` with ``tool_calls`` and ``ToolMessage`` s that a plain history cannot
tie to one round reliably), system messages (degrau's ``context`` gives the system
blocks), and messages other than text. Agents with tools commit their rounds
through :meth:`DegrauClient.commit_round` directly, as ``examples/agent_loop.py``
does. Summaries and facts are not in ``messages``: read them with
``DegrauClient.context`` (its ``system`` blocks) or ``DegrauClient.memory``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)

from .client import DegrauClient, Usage
from .errors import NotFound

__all__ = ["DegrauChatMessageHistory", "to_langchain"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def to_langchain(messages: Sequence[dict[str, Any]]) -> list[BaseMessage]:
    """Stored messages (the Messages API shape) as LangChain messages."""
    out: list[BaseMessage] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if message["role"] == "assistant":
            calls = [
                {"id": b["id"], "name": b["name"], "args": b.get("input") or {}}
                for b in content
                if b.get("type") == "tool_use"
            ]
            out.append(AIMessage(content=_text(content), tool_calls=calls))
            continue
        texts = [b for b in content if b.get("type") == "text"]
        for block in content:
            if block.get("type") == "tool_result":
                out.append(
                    ToolMessage(
                        content=_text(block.get("content") or ""),
                        tool_call_id=block["tool_use_id"],
                        status="error" if block.get("is_error") else "success",
                    )
                )
        if texts:
            out.append(HumanMessage(content=_text(texts)))
    return out


def _usage(message: AIMessage) -> Usage:
    meta = message.usage_metadata
    if not meta:
        return {"input_tokens": 0, "output_tokens": 0}
    details = meta.get("input_token_details") or {}
    read = int(details.get("cache_read") or 0)
    creation = int(details.get("cache_creation") or 0)
    # LangChain's input_tokens include the cached ones; the Messages API's do not.
    return {
        "input_tokens": max(int(meta.get("input_tokens") or 0) - read - creation, 0),
        "output_tokens": int(meta.get("output_tokens") or 0),
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": creation,
    }


class DegrauChatMessageHistory(BaseChatMessageHistory):
    """A contact's conversation in degrau, as a LangChain message history."""

    def __init__(self, client: DegrauClient, contact: str) -> None:
        self.client = client
        self.contact = contact
        self._pending: HumanMessage | None = None

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The current session's transcript, oldest first (plus a human message
        still waiting for its reply)."""
        context = self.client.context(self.contact)
        stored: list[BaseMessage] = []
        if not context["opens_session"]:
            stored = to_langchain(
                self.client.transcript_messages(self.contact, session=context["session"])
            )
        if self._pending is not None:
            stored.append(self._pending)
        return stored

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Commits one round per human message and the AI reply that follows it."""
        for message in messages:
            if isinstance(message, HumanMessage):
                if self._pending is not None:
                    raise ValueError(
                        "two human messages in a row: each needs the AI reply that "
                        "answers it before the next"
                    )
                self._pending = message
            elif isinstance(message, AIMessage):
                if self._pending is None:
                    raise ValueError("an AI message must answer a human message")
                if message.tool_calls:
                    raise ValueError(
                        "tool rounds cannot be expressed through a message history: "
                        "commit them with DegrauClient.commit_round"
                    )
                self._commit(self._pending, message)
                self._pending = None
            else:
                raise ValueError(
                    f"{type(message).__name__} is not stored by degrau's history: "
                    "only a human message and the AI reply to it"
                )

    def _commit(self, human: HumanMessage, ai: AIMessage) -> None:
        user_text, reply = _text(human.content), _text(ai.content)
        if not user_text or not reply:
            raise ValueError("a round needs the human text and the AI reply's text")
        context = self.client.context(self.contact)
        self.client.commit_round(
            self.contact,
            context["head"],
            [
                {"role": "user", "content": [{"type": "text", "text": user_text}]},
                {"role": "assistant", "content": [{"type": "text", "text": reply}]},
            ],
            _usage(ai),
        )

    def clear(self) -> None:
        """Erases the contact: transcript, summary, facts."""
        self._pending = None
        try:
            self.client.erase(self.contact)
        except NotFound:
            pass  # nothing stored: nothing to erase

"""A LangChain chat message history backed by degrau.

``DegrauChatMessageHistory(client, contact)`` gives LangChain what degrau gives
its own loop: the stepped summary, the facts and a bounded window instead of the
whole transcript.

``messages`` is the contact's ``GET .../context`` as LangChain messages, read once
per round:

- the two system blocks as two ``SystemMessage`` s: the tenant's instructions, then
  the fenced ``<contact_context>`` (the facts and, while the session is open, the
  summary of what the window no longer holds);
- the window exactly as degrau's own ``ask`` would send it: user text as
  ``HumanMessage``, assistant replies as ``AIMessage`` (``tool_use`` blocks as its
  ``tool_calls``), each ``tool_result`` as a ``ToolMessage``;
- a human message and the AI/tool messages of a round not complete yet.

With ``anthropic_blocks=True`` (the default) the content keeps the Messages API's
blocks as degrau serves them, ``cache_control`` included, which
``langchain_anthropic.ChatAnthropic`` sends unchanged (it merges the two system
messages into the request's ``system`` list and the tool messages into one user
message); ``thinking`` blocks keep their signatures. The history also puts the
context's ``cache_control`` on the last block of the window's last message (when
the request holds fewer than the API's four breakpoints): a history never sees the
new human message, where degrau's own loop puts that breakpoint, so the request
is cached up to the previous answer, and the next request, whose window breakpoint
falls on this request's human message, reads that entry back through the API's
look-back and writes only the last round. With ``anthropic_blocks=False`` messages
are plain strings and ``tool_calls`` with no breakpoints and no thinking blocks,
for chat models that do not take Anthropic's blocks.

``add_messages`` commits one round per turn with ``POST .../rounds`` once its final
answer arrives: a ``HumanMessage``; then, for a turn with tools, ``AIMessage`` s
with ``tool_calls`` each followed by the ``ToolMessage`` s answering every one of
its calls; then the final ``AIMessage`` without tool calls. That is the user's
message, the assistant's ``tool_use`` messages, the user's ``tool_result``
messages, ..., the final assistant text, in one round, with the usage of the last
``AIMessage`` as LangChain carries it: the Messages API's own ``usage`` in
``response_metadata["usage"]`` (``ChatAnthropic`` puts it there), else
``usage_metadata`` (LangChain's ``input_tokens`` include the cached ones, the
Messages API's do not). Where neither is there (a chain that ends in
``StrOutputParser`` hands the history a bare string) the round is committed
without usage, and degrau estimates its context from what it holds, so compaction
happens all the same (``last_recorded["usage_estimated"]``). Messages may come in
one call or several: what is not a whole round yet waits in memory
(``add_user_message`` then ``add_ai_message`` is one round).

The round is committed on the ``head`` of the context ``messages`` was built from,
not on a fresh read, so that the commit fails if the state the model saw is gone.
A head names the contact's incarnation, session and last sequence number: a
compaction step landing meanwhile does not change it (a step only folds old
messages into the summary, and the round is still the next one). A 409
``Conflict`` is retried (``max_commit_attempts`` in all) on a reread head only when
degrau says another round landed or the session went idle meanwhile: the model's
answer was already given to the user and did not see that round, and storing it as
the round after it records what was said, where dropping it would lose it (degrau's
advice, to rerun the round, is for loops that have not answered yet). A 409 for an
erased contact, or for an ``Idempotency-Key`` still in progress (the reread head is
unchanged), is raised: re-storing an answer built from erased memory would bring
that memory back. Every round carries an ``Idempotency-Key`` of its own, kept across
its attempts, so a commit whose answer was lost and is sent again is stored once.

What it cannot express, refused with ``ValueError`` before anything of the call is
committed: a ``SystemMessage`` or any message type other than human, AI and tool
(degrau's ``context`` gives the system blocks); a message before the human message
that opens a round, or a second human message before the round's final answer;
human content other than text (images, files); AI content blocks other than text,
``tool_use``, ``thinking`` and ``redacted_thinking`` (server tools, citations'
sources) and ``invalid_tool_calls``; a ``ToolMessage`` that answers no call of the
AI message before it, or an AI message before every call of the previous one is
answered; tool content other than text; a final answer without text; more than 8
tool-calling AI messages in a round (degrau's limit). Agents that need more commit
their rounds through :meth:`DegrauClient.commit_round` directly, as
``examples/agent_loop.py`` does.

``clear`` starts a new conversation, as LangChain users mean it: degrau closes
the contact's session now (what its idle timeout does: the session's record kept,
its facts extracted), and the next round opens a new session that starts with the
facts and no window. ``erase`` forgets the contact: everything degrau stores about
it, for good (a contact never seen is already erased).

Every method has its async twin (``aget_messages``, ``aadd_messages``, ``aclear``,
``aerase``), native on an :class:`~degrau_client.AsyncDegrauClient`; the sync
methods need a :class:`~degrau_client.DegrauClient` (an async client raises
``TypeError`` there), and the async ones run a sync client's calls in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .aio import AsyncDegrauClient
from .client import Context, DegrauClient, RecordedRound
from .errors import Conflict, NotFound
from .models import usage_from

__all__ = [
    "DegrauChatMessageHistory",
    "RoundBuilder",
    "acommit_with_retry",
    "commit_with_retry",
    "context_messages",
    "messages_api_usage",
    "round_messages",
    "system_messages",
    "to_langchain",
]

JSON = dict[str, Any]

#: The most tool-calling assistant messages one round may hold (degrau's limit:
#: 18 messages, the user's message and the answer with 8 calls and results between).
MAX_TOOL_ROUNDS = 8
#: The most ``cache_control`` breakpoints one request may carry (the API's limit).
MAX_BREAKPOINTS = 4
#: The 409 texts that say the head is stale because of a round or a session change
#: (``shared/src/converse/context.rs``). Anything else (an erase, a key in progress, a
#: future reason) is not retried: raising is the safe default.
_RETRYABLE_CONFLICTS = (
    "another round for this contact landed",
    "the contact's session changed",
)


def _text(content: Any) -> str:
    """The text of a message content: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _blocks(content: str | list[JSON]) -> list[JSON]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _plain_or_blocks(blocks: list[JSON]) -> str | list[str | JSON]:
    """One text block without a breakpoint as a plain string (what every chat
    model takes), else the blocks themselves."""
    if len(blocks) == 1 and blocks[0].get("type") == "text" and "cache_control" not in blocks[0]:
        return str(blocks[0]["text"])
    return list(blocks)


def system_messages(system: Sequence[Mapping[str, Any]], *, anthropic_blocks: bool = True) -> list[BaseMessage]:
    """degrau's system blocks as ``SystemMessage`` s, one per block (with its
    ``cache_control`` when ``anthropic_blocks``)."""
    if anthropic_blocks:
        return [SystemMessage(content=[dict(block)]) for block in system]
    return [SystemMessage(content=str(block.get("text", ""))) for block in system]


def to_langchain(messages: Sequence[Mapping[str, Any]], *, anthropic_blocks: bool = True) -> list[BaseMessage]:
    """Messages in the Messages API shape (degrau's window or transcript) as
    LangChain messages: see the module documentation for ``anthropic_blocks``."""
    out: list[BaseMessage] = []
    for message in messages:
        content = _blocks(message["content"])
        if message["role"] == "assistant":
            calls = [
                {
                    "id": b["id"],
                    "name": b["name"],
                    "args": b.get("input") or {},
                    "type": "tool_call",
                }
                for b in content
                if b.get("type") == "tool_use"
            ]
            if anthropic_blocks:
                # Tool calls stay in the content too: ChatAnthropic sends the
                # blocks in their order (thinking first, as the API requires).
                out.append(AIMessage(content=_plain_or_blocks(content), tool_calls=calls))
            else:
                out.append(AIMessage(content=_text(content), tool_calls=calls))
            continue
        texts = [b for b in content if b.get("type") == "text"]
        for block in content:
            if block.get("type") != "tool_result":
                continue
            tool_content: str | list[str | JSON] = _text(block.get("content") or "")
            if anthropic_blocks and "cache_control" in block:
                # The whole block, which ChatAnthropic passes on as it is: its
                # breakpoint sits on the tool_result itself.
                tool_content = [dict(block)]
            out.append(
                ToolMessage(
                    content=tool_content,
                    tool_call_id=block["tool_use_id"],
                    status="error" if block.get("is_error") else "success",
                )
            )
        if texts:
            if anthropic_blocks:
                out.append(HumanMessage(content=_plain_or_blocks(texts)))
            else:
                out.append(HumanMessage(content=_text(texts)))
    return out


def _with_breakpoint(message: BaseMessage, cache_control: Mapping[str, Any]) -> BaseMessage:
    """``message`` with ``cache_control`` on its last block."""
    content = message.content
    if isinstance(content, str):
        blocks: list[Any] = [{"type": "text", "text": content}]
    else:
        blocks = [dict(b) if isinstance(b, dict) else {"type": "text", "text": b} for b in content]
    if not blocks:
        return message
    blocks[-1]["cache_control"] = dict(cache_control)
    return message.model_copy(update={"content": blocks})


def _breakpoints(system: Sequence[Mapping[str, Any]], messages: Sequence[Mapping[str, Any]]) -> int:
    count = sum(1 for block in system if "cache_control" in block)
    for message in messages:
        content = message["content"]
        if not isinstance(content, str):
            count += sum(1 for block in content if "cache_control" in block)
    return count


def context_messages(context: Context, *, anthropic_blocks: bool = True) -> list[BaseMessage]:
    """A context (``GET .../context``) as the LangChain messages a request starts
    with: the system blocks, then the window, its last block marked with the
    context's ``cache_control`` (see the module documentation)."""
    window = to_langchain(context["messages"], anthropic_blocks=anthropic_blocks)
    if anthropic_blocks and window and _breakpoints(context["system"], context["messages"]) < MAX_BREAKPOINTS:
        window[-1] = _with_breakpoint(window[-1], context["cache_control"])
    return [
        *system_messages(context["system"], anthropic_blocks=anthropic_blocks),
        *window,
    ]


def messages_api_usage(message: AIMessage) -> JSON | None:
    """An ``AIMessage`` 's usage as the Messages API reports it, or ``None`` when it
    carries none (degrau then estimates it).

    The API's own ``usage``, when the chat model kept it in
    ``response_metadata["usage"]`` (``ChatAnthropic`` does), taken as it is; else
    ``usage_metadata``: ``input_tokens`` without the cached ones (LangChain counts
    them in), the two cache counts, and the 5-minute/1-hour split of the cache
    writes (``cache_creation``) when LangChain has it (``langchain_anthropic`` puts
    ``ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens`` in
    ``input_token_details`` and then sets ``cache_creation`` there to 0)."""
    raw = (message.response_metadata or {}).get("usage")
    if isinstance(raw, Mapping) and isinstance(raw.get("input_tokens"), int):
        return dict(usage_from(raw))
    meta = message.usage_metadata
    if not meta:
        return None
    details: Mapping[str, Any] = meta.get("input_token_details") or {}
    read = int(details.get("cache_read") or 0)
    five_minutes = details.get("ephemeral_5m_input_tokens")
    one_hour = details.get("ephemeral_1h_input_tokens")
    split = int(five_minutes or 0) + int(one_hour or 0)
    creation = max(int(details.get("cache_creation") or 0), split)
    usage: JSON = {
        "input_tokens": max(int(meta.get("input_tokens") or 0) - read - creation, 0),
        "output_tokens": int(meta.get("output_tokens") or 0),
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": creation,
    }
    if five_minutes is not None or one_hour is not None:
        usage["cache_creation"] = {
            "ephemeral_5m_input_tokens": int(five_minutes or 0),
            "ephemeral_1h_input_tokens": int(one_hour or 0),
        }
    return usage


def _assistant_blocks(message: AIMessage) -> list[JSON]:
    """An AI message's content as the blocks degrau stores, its tool calls as
    ``tool_use`` blocks (from ``tool_calls``, the parsed arguments)."""
    if message.invalid_tool_calls:
        raise ValueError("an AI message with invalid_tool_calls cannot be stored: fix or drop them first")
    calls = {str(call["id"]): call for call in message.tool_calls if call.get("id")}
    if len(calls) != len(message.tool_calls):
        raise ValueError("every tool call needs an id to be paired with its ToolMessage")

    def tool_use(call_id: str) -> JSON:
        call = calls.pop(call_id)
        return {
            "type": "tool_use",
            "id": call_id,
            "name": call["name"],
            "input": dict(call["args"]),
        }

    out: list[JSON] = []
    content = message.content
    for block in [content] if isinstance(content, str) else content:
        if isinstance(block, str):
            block = {"type": "text", "text": block}
        kind = block.get("type")
        if kind == "text":
            if str(block.get("text", "")).strip():
                out.append({"type": "text", "text": str(block["text"])})
        elif kind == "tool_use":
            if block.get("id") in calls:
                out.append(tool_use(str(block["id"])))
        elif kind == "thinking":
            out.append({k: block[k] for k in ("type", "thinking", "signature") if k in block})
        elif kind == "redacted_thinking":
            out.append({"type": "redacted_thinking", "data": block["data"]})
        else:
            raise ValueError(
                f"a {kind!r} block in an AI message: degrau stores text, tool_use, "
                "thinking and redacted_thinking blocks"
            )
    out.extend(tool_use(call_id) for call_id in list(calls))
    return out


def _tool_result(message: ToolMessage) -> JSON:
    content = message.content
    if (
        isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], dict)
        and content[0].get("type") == "tool_result"
    ):
        content = content[0].get("content") or ""  # a block to_langchain made
    if not isinstance(content, str):
        if any(not isinstance(b, str) and b.get("type") != "text" for b in content):
            raise ValueError("a ToolMessage with content other than text cannot be stored")
        content = _text(content)
    result: JSON = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": content,
    }
    if message.status == "error":
        result["is_error"] = True
    return result


@dataclass
class RoundBuilder:
    """One turn's LangChain messages gathered into degrau rounds: a human message,
    AI messages with tool calls each answered by tool messages, the final answer
    (see the module documentation for what is refused)."""

    #: The messages of the round not complete yet, as given.
    pending: list[BaseMessage] = field(default_factory=list)
    _round: list[JSON] = field(default_factory=list)
    _awaiting: set[str] = field(default_factory=set)
    _tool_rounds: int = 0

    def copy(self) -> RoundBuilder:
        """A builder in the same state that can be changed apart from this one."""
        return RoundBuilder(
            list(self.pending),
            [{"role": m["role"], "content": list(m["content"])} for m in self._round],
            set(self._awaiting),
            self._tool_rounds,
        )

    def add(self, message: BaseMessage) -> tuple[list[JSON], AIMessage] | None:
        """Adds a message; answers the whole round (the Messages API messages and
        the final AI message, whose usage is the round's) when it completes one."""
        if isinstance(message, HumanMessage):
            self._human(message)
        elif isinstance(message, ToolMessage):
            self._tool(message)
        elif isinstance(message, AIMessage):
            if self._ai(message):
                done = self._round
                self.pending, self._round, self._tool_rounds = [], [], 0
                return done, message
        else:
            # ValueError like every other refusal: callers catch one type.
            raise ValueError(
                f"{type(message).__name__} is not stored by degrau's history: a round is a "
                "human message, AI messages with tool calls and their tool messages, and the "
                "final AI answer (degrau's context gives the system blocks)"
            )
        self.pending.append(message)
        return None

    def _human(self, message: HumanMessage) -> None:
        if self._round:
            raise ValueError(
                "a human message before the final AI answer of the round it follows: each "
                "human message needs the AI reply that answers it before the next"
            )
        content = message.content
        if not isinstance(content, str) and any(not isinstance(b, str) and b.get("type") != "text" for b in content):
            raise ValueError("a human message with content other than text cannot be stored")
        text = _text(content)
        if not text.strip():
            raise ValueError("a human message needs text")
        self._round.append({"role": "user", "content": [{"type": "text", "text": text}]})

    def _tool(self, message: ToolMessage) -> None:
        if message.tool_call_id not in self._awaiting:
            raise ValueError(
                f"ToolMessage {message.tool_call_id!r} answers no unanswered tool call of the AI message before it"
            )
        self._awaiting.discard(message.tool_call_id)
        result = _tool_result(message)
        last = self._round[-1]
        if last["role"] == "user":
            last["content"].append(result)
        else:
            self._round.append({"role": "user", "content": [result]})

    def _ai(self, message: AIMessage) -> bool:
        if not self._round:
            raise ValueError("an AI message must answer a human message")
        if self._awaiting:
            raise ValueError(
                f"an AI message before the tool calls {sorted(self._awaiting)} were answered by ToolMessages"
            )
        blocks = _assistant_blocks(message)
        if message.tool_calls:
            if self._tool_rounds == MAX_TOOL_ROUNDS:
                raise ValueError(f"more than {MAX_TOOL_ROUNDS} tool-calling AI messages in one round")
            self._tool_rounds += 1
            self._awaiting = {str(call["id"]) for call in message.tool_calls}
            self._round.append({"role": "assistant", "content": blocks})
            return False
        if not any(b["type"] == "text" for b in blocks):
            raise ValueError("a round's final AI answer needs text")
        self._round.append({"role": "assistant", "content": blocks})
        return True


def _retryable(conflict: Conflict) -> bool:
    return conflict.message.startswith(_RETRYABLE_CONFLICTS)


def round_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages from the last human message on: the round a run answers (an
    agent's or a graph's state may hold earlier runs' messages, under a
    checkpointer)."""
    starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    if not starts:
        raise ValueError("the state holds no human message: a round starts with one")
    return list(messages[starts[-1] :])


def whole_round(messages: Sequence[BaseMessage]) -> tuple[list[JSON], AIMessage]:
    """A run's messages as one round: its Messages API messages and the final AI
    message (whose usage is the round's); ``ValueError`` unless they are exactly one
    whole round ending in a final answer."""
    builder = RoundBuilder()
    done = [d for d in map(builder.add, round_messages(messages)) if d is not None]
    if len(done) != 1 or builder.pending:
        raise ValueError("the run's messages are not one whole round ending in a final answer")
    return done[0]


def commit_with_retry(
    client: DegrauClient,
    contact: str,
    head: str,
    messages: list[JSON],
    usage: Mapping[str, Any] | None,
    *,
    attempts: int = 3,
    idempotency_key: str | None = None,
) -> RecordedRound:
    """Commits a round on ``head`` (the one the model's context was read at); a
    stale head because another round landed or the session went idle is reread and
    the same round committed on it, ``attempts`` times in all (see the module
    documentation for why, and for the conflicts raised instead). ``usage``
    ``None``: degrau estimates it."""
    key = idempotency_key or f"langchain-{uuid.uuid4()}"
    for attempt in range(1, attempts + 1):
        try:
            return client.commit_round(contact, head, messages, usage, idempotency_key=key)
        except Conflict as conflict:
            if attempt == attempts or not _retryable(conflict):
                raise
            fresh = client.context(contact)["head"]
            if fresh == head:
                raise  # the head did not move: not a stale head
            head = fresh
    raise AssertionError("unreachable: the last attempt returns or raises")


async def acommit_with_retry(
    client: AsyncDegrauClient | DegrauClient,
    contact: str,
    head: str,
    messages: list[JSON],
    usage: Mapping[str, Any] | None,
    *,
    attempts: int = 3,
    idempotency_key: str | None = None,
) -> RecordedRound:
    """:func:`commit_with_retry` on an async client (a sync one's calls run in a
    thread)."""
    if isinstance(client, DegrauClient):
        return await asyncio.to_thread(
            commit_with_retry,
            client,
            contact,
            head,
            messages,
            usage,
            attempts=attempts,
            idempotency_key=idempotency_key,
        )
    key = idempotency_key or f"langchain-{uuid.uuid4()}"
    for attempt in range(1, attempts + 1):
        try:
            return await client.commit_round(contact, head, messages, usage, idempotency_key=key)
        except Conflict as conflict:
            if attempt == attempts or not _retryable(conflict):
                raise
            fresh = (await client.context(contact))["head"]
            if fresh == head:
                raise
            head = fresh
    raise AssertionError("unreachable: the last attempt returns or raises")


def sync_client(client: DegrauClient | AsyncDegrauClient, what: str) -> DegrauClient:
    """``client`` when it is a sync one; ``TypeError`` naming the async method to
    call instead."""
    if not isinstance(client, DegrauClient):
        raise TypeError(f"an AsyncDegrauClient serves the async methods: use {what}")
    return client


async def acontext(client: DegrauClient | AsyncDegrauClient, contact: str) -> Context:
    """The contact's context on either client (a sync one's call in a thread)."""
    if isinstance(client, DegrauClient):
        return await asyncio.to_thread(client.context, contact)
    return await client.context(contact)


class DegrauChatMessageHistory(BaseChatMessageHistory):
    """A contact's conversation in degrau, as a LangChain message history (see the
    module documentation), on a :class:`~degrau_client.DegrauClient` or an
    :class:`~degrau_client.AsyncDegrauClient`."""

    def __init__(
        self,
        client: DegrauClient | AsyncDegrauClient,
        contact: str,
        *,
        anthropic_blocks: bool = True,
        max_commit_attempts: int = 3,
    ) -> None:
        self.client = client
        self.contact = contact
        self.anthropic_blocks = anthropic_blocks
        self.max_commit_attempts = max_commit_attempts
        #: The context ``messages`` was built from (its ``head`` is what the next
        #: round is committed on); ``None`` until read, and again after a commit.
        self.context: Context | None = None
        #: The answer of the last round committed (``usage_estimated`` says whether
        #: degrau estimated its context).
        self.last_recorded: RecordedRound | None = None
        self._context_messages: list[BaseMessage] = []
        self._builder = RoundBuilder()

    def _keep(self, context: Context) -> Context:
        self.context = context
        self._context_messages = context_messages(context, anthropic_blocks=self.anthropic_blocks)
        return context

    def _read_context(self) -> Context:
        if self.context is None:
            self._keep(sync_client(self.client, "aget_messages").context(self.contact))
        assert self.context is not None
        return self.context

    async def _aread_context(self) -> Context:
        if self.context is None:
            self._keep(await acontext(self.client, self.contact))
        assert self.context is not None
        return self.context

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The system blocks and the window of the contact's context, then the
        round in progress. Read once per round: later reads answer the same
        context (``RunnableWithMessageHistory`` reads it again after the model
        call to tell the history from the new messages)."""
        self._read_context()
        return [*self._context_messages, *self._builder.pending]

    async def aget_messages(self) -> list[BaseMessage]:
        """:attr:`messages`, read on the async client."""
        await self._aread_context()
        return [*self._context_messages, *self._builder.pending]

    def _rounds(self, messages: Sequence[BaseMessage]) -> list[tuple[list[JSON], AIMessage]]:
        """The rounds ``messages`` complete; refused whole (``ValueError``) before
        any is committed."""
        trial = self._builder.copy()
        rounds = [done for done in map(trial.add, messages) if done is not None]
        self._builder = trial
        return rounds

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Commits a round for each turn completed by ``messages``; the messages of
        a turn not complete yet wait for the rest. Invalid messages raise
        ``ValueError`` with nothing of the call committed."""
        client = sync_client(self.client, "aadd_messages")
        for round_messages_, final in self._rounds(messages):
            head = self._read_context()["head"]
            try:
                self.last_recorded = commit_with_retry(
                    client,
                    self.contact,
                    head,
                    round_messages_,
                    messages_api_usage(final),
                    attempts=self.max_commit_attempts,
                )
            finally:
                self.context = None  # the next round reads the context anew

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """:meth:`add_messages` on the async client."""
        for round_messages_, final in self._rounds(messages):
            head = (await self._aread_context())["head"]
            try:
                self.last_recorded = await acommit_with_retry(
                    self.client,
                    self.contact,
                    head,
                    round_messages_,
                    messages_api_usage(final),
                    attempts=self.max_commit_attempts,
                )
            finally:
                self.context = None

    def clear(self) -> None:
        """Starts a new conversation: degrau closes the contact's session (facts
        kept; :meth:`erase` forgets the contact)."""
        self._builder = RoundBuilder()
        self.context = None
        sync_client(self.client, "aclear").close_session(self.contact)

    async def aclear(self) -> None:
        """:meth:`clear` on the async client."""
        self._builder = RoundBuilder()
        self.context = None
        if isinstance(self.client, DegrauClient):
            await asyncio.to_thread(self.client.close_session, self.contact)
        else:
            await self.client.close_session(self.contact)

    def erase(self) -> None:
        """Erases the contact: transcript, summaries, session records and facts, for
        good (``DELETE /v1/contacts/{contact}``)."""
        self._builder = RoundBuilder()
        self.context = None
        with contextlib.suppress(NotFound):  # nothing stored: nothing to erase
            sync_client(self.client, "aerase").erase(self.contact)

    async def aerase(self) -> None:
        """:meth:`erase` on the async client."""
        self._builder = RoundBuilder()
        self.context = None
        with contextlib.suppress(NotFound):
            if isinstance(self.client, DegrauClient):
                await asyncio.to_thread(self.client.erase, self.contact)
            else:
                await self.client.erase(self.contact)

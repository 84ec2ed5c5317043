"""degrau as a LangGraph graph's conversation memory.

A graph that answers one user message per run keeps the contact's memory in
degrau with two nodes around its own model and tool nodes
(``examples/langgraph_agent.py``)::

    START -> degrau_load -> agent <-> tools
                              |
                              v
                        degrau_commit -> END

- :meth:`DegrauMemory.load` (or ``aload``, an async node) reads ``GET .../context`` into the state:
  ``degrau_context`` (the system blocks and the window as LangChain messages, see
  :mod:`degrau_client.langchain`) and ``degrau_head``.
- The model node calls the model with :func:`model_input` (the context, then this
  run's round: the human message and the AI and tool messages after it).
- :meth:`DegrauMemory.commit` commits the round (``POST .../rounds``) on
  ``degrau_head``, retried on a stale head as the LangChain history does, and puts
  the answer in ``degrau_recorded``.

The contact is ``config["configurable"]["contact"]``. The round is the state's
messages from its last human message on, with the same rules and refusals as the
history (:class:`~degrau_client.langchain.RoundBuilder`).

Which of LangGraph's memory interfaces degrau serves:

- **checkpointer** (``BaseCheckpointSaver``): no. A checkpoint is a snapshot of any
  graph state (every channel, its versions, pending writes, at every super-step),
  for resuming and time travel; degrau stores conversation rounds, whole, and
  replaces old ones with a summary. The two nodes make a checkpointer unnecessary
  for the conversation: each run starts from the contact's context. A graph may
  still use one for its own state (interrupts, human-in-the-loop); its message list
  then grows run after run, which is why :func:`model_input` and the commit take
  only the last round from it.
- **store** (``BaseStore``): :class:`DegrauFactsStore` reads and writes the
  contacts' facts through the operator routes (``GET .../facts``, ``PUT`` and
  ``DELETE .../facts/{key}``; the client's token needs ``memory:read`` and
  ``memory:write``): namespace ``("facts", contact)``, one item per fact key, its
  value ``{"value": ...}``. A value an operator puts stands against degrau's later
  extractions of older messages, under the tenant's fact policy (a key it does
  not allow, or a value it refuses, raises
  :class:`~degrau_client.InvalidRequest`).
- **message history**: the two nodes here, or
  :class:`~degrau_client.langchain.DegrauChatMessageHistory` for chains.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any, cast

from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import MessagesState
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from .aio import AsyncDegrauClient
from .client import DegrauClient, RecordedRound
from .errors import NotFound
from .langchain import (
    acommit_with_retry,
    acontext,
    commit_with_retry,
    context_messages,
    messages_api_usage,
    round_messages,
    sync_client,
    whole_round,
)
from .models import OperatorFact

__all__ = ["DegrauFactsStore", "DegrauMemory", "DegrauState", "model_input"]


class DegrauState(MessagesState, total=False):
    """A graph state with degrau's context beside the run's messages."""

    #: The contact's system blocks and window, read by ``degrau_load``.
    degrau_context: list[AnyMessage]
    #: The head the round is committed on.
    degrau_head: str
    #: The committed round, after ``degrau_commit``.
    degrau_recorded: RecordedRound


def model_input(state: DegrauState) -> list[BaseMessage]:
    """What the model node sends: the context, then this run's round."""
    return [*state.get("degrau_context", []), *round_messages(state["messages"])]


def _contact(config: RunnableConfig) -> str:
    contact = (config.get("configurable") or {}).get("contact")
    if not isinstance(contact, str) or not contact:
        raise ValueError('run the graph with config={"configurable": {"contact": ...}}')
    return contact


class DegrauMemory:
    """The two nodes that keep a graph's conversation in degrau: :meth:`load` and
    :meth:`commit` on a :class:`~degrau_client.DegrauClient`, :meth:`aload` and
    :meth:`acommit` (async nodes) on either client."""

    def __init__(
        self,
        client: DegrauClient | AsyncDegrauClient,
        *,
        anthropic_blocks: bool = True,
        max_commit_attempts: int = 3,
    ) -> None:
        self.client = client
        self.anthropic_blocks = anthropic_blocks
        self.max_commit_attempts = max_commit_attempts

    def _loaded(self, context: Any) -> dict[str, Any]:
        return {
            "degrau_context": context_messages(context, anthropic_blocks=self.anthropic_blocks),
            "degrau_head": context["head"],
        }

    def load(self, state: DegrauState, config: RunnableConfig) -> dict[str, Any]:
        """Node: the contact's context into the state."""
        return self._loaded(sync_client(self.client, "aload").context(_contact(config)))

    async def aload(self, state: DegrauState, config: RunnableConfig) -> dict[str, Any]:
        """Async node: :meth:`load`."""
        return self._loaded(await acontext(self.client, _contact(config)))

    def commit(self, state: DegrauState, config: RunnableConfig) -> dict[str, Any]:
        """Node: the run's round committed on the head ``load`` read."""
        round_messages_, final = whole_round(state["messages"])
        recorded = commit_with_retry(
            sync_client(self.client, "acommit"),
            _contact(config),
            state["degrau_head"],
            round_messages_,
            messages_api_usage(final),
            attempts=self.max_commit_attempts,
        )
        return {"degrau_recorded": recorded}

    async def acommit(self, state: DegrauState, config: RunnableConfig) -> dict[str, Any]:
        """Async node: :meth:`commit`."""
        round_messages_, final = whole_round(state["messages"])
        recorded = await acommit_with_retry(
            self.client,
            _contact(config),
            state["degrau_head"],
            round_messages_,
            messages_api_usage(final),
            attempts=self.max_commit_attempts,
        )
        return {"degrau_recorded": recorded}


def _time(seconds: int) -> datetime:
    # timezone.utc, not datetime.UTC: the package supports Python 3.10.
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def _item(namespace: tuple[str, ...], fact: OperatorFact) -> Item:
    value = {"value": fact["value"], "set_by": fact["set_by"], "history": fact["history"]}
    return Item(
        value=value,
        key=fact["key"],
        namespace=namespace,
        created_at=_time(fact["updated_at"]),
        updated_at=_time(fact["updated_at"]),
    )


def _fact_contact(namespace: tuple[str, ...]) -> str | None:
    """The contact a namespace names: ``("facts", contact)``."""
    return namespace[1] if len(namespace) == 2 and namespace[0] == "facts" else None


def _fact_value(op: PutOp) -> str:
    value = op.value
    if not isinstance(value, dict) or not isinstance(value.get("value"), str) or set(value) - {"value"}:
        raise ValueError('a fact\'s value is {"value": "one line"}')
    return cast(str, value["value"])


class DegrauFactsStore(BaseStore):
    """A LangGraph ``BaseStore`` over contacts' facts, through the operator routes
    (see the module documentation): namespace ``("facts", contact)``, key the
    fact's key, value ``{"value", "set_by", "history"}`` read and ``{"value"}``
    written; ``put`` with ``None`` deletes. Search lists a contact's facts
    (``filter`` on the value's fields; ``query`` is not supported: degrau has no
    semantic search); ``list_namespaces`` lists the tenant's contacts, most
    recently active first. Sync operations need a
    :class:`~degrau_client.DegrauClient`; the async ones (``aget``, ``aput``, ...)
    take either client."""

    def __init__(self, client: DegrauClient | AsyncDegrauClient) -> None:
        self.client = client

    # The operations, each a function of one store call's answer, so the sync and
    # async batches share them.

    def _search(self, op: SearchOp, facts: list[OperatorFact]) -> list[SearchItem]:
        if op.query:
            raise NotImplementedError("degrau's facts have no semantic search: search without query")
        items = [
            SearchItem(i.namespace, i.key, i.value, i.created_at, i.updated_at)
            for i in (_item(op.namespace_prefix, fact) for fact in facts)
            if all(i.value.get(k) == v for k, v in (op.filter or {}).items())
        ]
        return items[op.offset : op.offset + op.limit]

    @staticmethod
    def _namespaces(op: ListNamespacesOp, contacts: list[str]) -> list[tuple[str, ...]]:
        spaces: list[tuple[str, ...]] = [("facts", contact) for contact in contacts]
        for condition in op.match_conditions or ():
            path = tuple(condition.path)
            if condition.match_type == "prefix":
                spaces = [s for s in spaces if all(p in ("*", v) for p, v in zip(path, s, strict=False))]
            else:
                spaces = [
                    s for s in spaces if all(p in ("*", v) for p, v in zip(reversed(path), reversed(s), strict=False))
                ]
        return spaces[op.offset : op.offset + op.limit]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        client = sync_client(self.client, "abatch")

        def facts(namespace: tuple[str, ...]) -> list[OperatorFact]:
            contact = _fact_contact(namespace)
            if contact is None:
                return []
            try:
                return client.list_facts(contact)
            except NotFound:
                return []

        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                found = [f for f in facts(op.namespace) if f["key"] == op.key]
                results.append(_item(op.namespace, found[0]) if found else None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op, facts(op.namespace_prefix)))
            elif isinstance(op, PutOp):
                contact = _fact_contact(op.namespace)
                if contact is None:
                    raise ValueError('facts live in the namespace ("facts", contact)')
                if op.value is None:
                    with contextlib.suppress(NotFound):
                        client.delete_fact(contact, op.key)
                else:
                    client.put_fact(contact, op.key, _fact_value(op))
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                contacts = [c["contact"] for c in client.iter_contacts()]
                results.append(self._namespaces(op, contacts))
            else:
                raise NotImplementedError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if isinstance(self.client, DegrauClient):
            return await asyncio.to_thread(self.batch, list(ops))
        client = self.client

        async def facts(namespace: tuple[str, ...]) -> list[OperatorFact]:
            contact = _fact_contact(namespace)
            if contact is None:
                return []
            try:
                return await client.list_facts(contact)
            except NotFound:
                return []

        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                found = [f for f in await facts(op.namespace) if f["key"] == op.key]
                results.append(_item(op.namespace, found[0]) if found else None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op, await facts(op.namespace_prefix)))
            elif isinstance(op, PutOp):
                contact = _fact_contact(op.namespace)
                if contact is None:
                    raise ValueError('facts live in the namespace ("facts", contact)')
                if op.value is None:
                    with contextlib.suppress(NotFound):
                        await client.delete_fact(contact, op.key)
                else:
                    await client.put_fact(contact, op.key, _fact_value(op))
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                contacts = [c["contact"] async for c in client.iter_contacts()]
                results.append(self._namespaces(op, contacts))
            else:
                raise NotImplementedError(f"unknown store operation {type(op).__name__}")
        return results

"""degrau as a LangGraph graph's conversation memory.

A graph that answers one user message per run keeps the contact's memory in
degrau with two nodes around its own model and tool nodes
(``examples/langgraph_agent.py``)::

    START -> degrau_load -> agent <-> tools
                              |
                              v
                        degrau_commit -> END

- :meth:`DegrauMemory.load` reads ``GET .../context`` into the state:
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
- **store** (``BaseStore``): :class:`DegrauFactsStore` is a read-only view of the
  contact's facts (``GET .../memory``): namespace ``("facts", contact)``, one item
  per fact key. Facts are written only by degrau's own extraction from the closed
  session, so ``put`` and ``delete`` raise ``NotImplementedError``.
- **message history**: the two nodes here, or
  :class:`~degrau_client.langchain.DegrauChatMessageHistory` for chains.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage
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

from .client import DegrauClient, RecordedRound
from .errors import NotFound
from .langchain import (
    RoundBuilder,
    commit_with_retry,
    context_messages,
    messages_api_usage,
)

__all__ = ["DegrauFactsStore", "DegrauMemory", "DegrauState", "model_input"]


class DegrauState(MessagesState, total=False):
    """A graph state with degrau's context beside the run's messages."""

    #: The contact's system blocks and window, read by ``degrau_load``.
    degrau_context: list[AnyMessage]
    #: The head the round is committed on.
    degrau_head: str
    #: The committed round, after ``degrau_commit``.
    degrau_recorded: RecordedRound


def _round(messages: list[AnyMessage]) -> list[AnyMessage]:
    """The messages from the last human message on: this run's round."""
    starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    if not starts:
        raise ValueError("the state holds no human message: a round starts with one")
    return messages[starts[-1] :]


def model_input(state: DegrauState) -> list[BaseMessage]:
    """What the model node sends: the context, then this run's round."""
    return [*state.get("degrau_context", []), *_round(state["messages"])]


def _contact(config: RunnableConfig) -> str:
    contact = (config.get("configurable") or {}).get("contact")
    if not isinstance(contact, str) or not contact:
        raise ValueError('run the graph with config={"configurable": {"contact": ...}}')
    return contact


class DegrauMemory:
    """The two nodes that keep a graph's conversation in degrau."""

    def __init__(
        self,
        client: DegrauClient,
        *,
        anthropic_blocks: bool = True,
        max_commit_attempts: int = 3,
    ) -> None:
        self.client = client
        self.anthropic_blocks = anthropic_blocks
        self.max_commit_attempts = max_commit_attempts

    def load(self, state: DegrauState, config: RunnableConfig) -> dict[str, Any]:
        """Node: the contact's context into the state."""
        context = self.client.context(_contact(config))
        return {
            "degrau_context": context_messages(context, anthropic_blocks=self.anthropic_blocks),
            "degrau_head": context["head"],
        }

    def commit(self, state: DegrauState, config: RunnableConfig) -> dict[str, Any]:
        """Node: the run's round committed on the head ``load`` read."""
        builder = RoundBuilder()
        done = [d for d in map(builder.add, _round(state["messages"])) if d is not None]
        if len(done) != 1 or builder.pending:
            raise ValueError("the run's messages are not one whole round ending in a final answer")
        round_messages, final = done[0]
        recorded = commit_with_retry(
            self.client,
            _contact(config),
            state["degrau_head"],
            round_messages,
            messages_api_usage(final),
            attempts=self.max_commit_attempts,
        )
        return {"degrau_recorded": recorded}


def _time(seconds: int) -> datetime:
    # timezone.utc, not datetime.UTC: the package supports Python 3.10.
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


class DegrauFactsStore(BaseStore):
    """A read-only ``BaseStore`` over contacts' facts: namespace
    ``("facts", contact)``, key the fact's key, value ``{"value", "source"}``
    (``source``: the session and sequence number of the message it came from).
    Search lists a contact's facts (``filter`` on the value's fields; ``query`` is
    not supported: degrau has no semantic search); namespaces cannot be listed
    (degrau lists no contacts)."""

    def __init__(self, client: DegrauClient) -> None:
        self.client = client

    def _facts(self, namespace: tuple[str, ...]) -> list[Item]:
        if len(namespace) != 2 or namespace[0] != "facts":
            return []
        try:
            facts = self.client.memory(namespace[1])["facts"]
        except NotFound:
            return []
        return [
            Item(
                value={"value": fact["value"], "source": fact["source"]},
                key=fact["key"],
                namespace=namespace,
                created_at=_time(fact["updated_at"]),
                updated_at=_time(fact["updated_at"]),
            )
            for fact in facts
        ]

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.query:
            raise NotImplementedError("degrau's facts have no semantic search: search without query")
        items = [
            SearchItem(i.namespace, i.key, i.value, i.created_at, i.updated_at)
            for i in self._facts(op.namespace_prefix)
            if all(i.value.get(k) == v for k, v in (op.filter or {}).items())
        ]
        return items[op.offset : op.offset + op.limit]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(next((i for i in self._facts(op.namespace) if i.key == op.key), None))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                raise NotImplementedError(
                    "degrau's facts are read-only: they are extracted by degrau from closed sessions"
                )
            elif isinstance(op, ListNamespacesOp):
                raise NotImplementedError("degrau lists no contacts: read a contact's facts by namespace")
            else:
                raise NotImplementedError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

"""Sixty turns of a LangChain chat through ``RunnableWithMessageHistory`` with
``langchain_anthropic.ChatAnthropic`` pointed at the offline stand-in: once with
degrau's history, once with LangChain's ``InMemoryChatMessageHistory`` (the whole
conversation every turn, as LangChain keeps it), and once with the whole
conversation and a cache breakpoint on its last block (full history, cached).

It shows that with degrau the requests stay bounded by the tenant's compaction
threshold plus one round while the full history grows, that an order code said at
turn 2 reaches the model at turn 60 through the summary, and what each chain sends
and reads from the cache. The figures go to the output; ``results/langchain.md``
(the README's table) is written only by the bench command, this test with
``DEGRAU_BENCH_RESULTS=1``, so that running the tests leaves the tree as it was.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_anthropic import ChatAnthropic
from langchain_core.chat_history import (
    BaseChatMessageHistory,
    InMemoryChatMessageHistory,
)
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from degrau_client import DegrauClient
from degrau_client.langchain import DegrauChatMessageHistory

TURNS = 60
# A small tenant threshold (the default is 8,000: README's configuration table) so
# that several steps land within sixty short turns.
THRESHOLD = 2_000
RESULTS = Path(__file__).resolve().parents[3] / "results" / "langchain.md"
# Bounded generously: under `cargo lambda watch` the compactor may still be compiling
# when its first job arrives on a loaded machine.
STEP_WAIT_SECONDS = 600


def turn_text(i: int, tag: str) -> str:
    """Turn ``i`` (1-based) of a chat with no scheduling words (no tools here)."""
    if i == 2:
        return f"turn {i:02} [{tag}]: my order code is {order_code(tag)}, please keep it in mind."
    if i == TURNS:
        return f"turn {i:02} [{tag}]: which order code did I give you at the start?"
    return f"turn {i:02} [{tag}]: tell me something about the shop's history and its owners, nothing urgent."


def order_code(tag: str) -> str:
    return f"ORD-{tag.upper()}-7731"


@dataclass
class Run:
    """What one chain sent and read, turn by turn (from the model's responses)."""

    name: str
    sent: list[int] = field(default_factory=list)  # input tokens of each request
    read: list[int] = field(default_factory=list)  # of which read from the cache
    written: list[int] = field(default_factory=list)  # of which written to it
    written_1h: list[int] = field(default_factory=list)  # of those, for an hour

    def record(self, reply: AIMessage) -> None:
        meta = reply.usage_metadata
        assert meta is not None, "ChatAnthropic reports usage"
        details = meta.get("input_token_details") or {}
        # langchain-anthropic zeroes cache_creation when it gives the 5m/1h split.
        one_hour = int(details.get("ephemeral_1h_input_tokens") or 0)
        written = int(details.get("cache_creation") or 0) + int(details.get("ephemeral_5m_input_tokens") or 0)
        self.sent.append(int(meta["input_tokens"]))
        self.read.append(int(details.get("cache_read") or 0))
        self.written.append(written + one_hour)
        self.written_1h.append(one_hour)

    @property
    def input_cost(self) -> float:
        """Input priced in uncached tokens: reads 0.1x, five-minute writes 1.25x,
        one-hour writes 2x (the API's multipliers)."""
        uncached = sum(self.sent) - sum(self.read) - sum(self.written)
        five_minutes = sum(self.written) - sum(self.written_1h)
        return uncached + 0.1 * sum(self.read) + 1.25 * five_minutes + 2 * sum(self.written_1h)

    @property
    def cache_read_ratio(self) -> float:
        return sum(self.read) / sum(self.sent)

    def row(self, requests: list[dict[str, Any]], baseline: Run) -> str:
        most = max(len(r["messages"]) for r in requests)
        return (
            f"| {self.name} | {sum(self.sent):,} | {sum(self.sent) / sum(baseline.sent):.2f}× | "
            f"{max(self.sent):,} | {self.sent[-1]:,} | {most} | {sum(self.read):,} | "
            f"{sum(self.written):,} | {self.cache_read_ratio:.1%} | {self.input_cost:,.0f} | "
            f"{self.input_cost / baseline.input_cost:.2f}× |"
        )


def model(stack: Any) -> ChatAnthropic:
    return ChatAnthropic(  # type: ignore[call-arg]
        model="claude-sonnet-4-5",
        base_url=stack.standin,
        api_key="offline-stand-in",
        max_retries=0,
        max_tokens=1024,
    )


def mark_last_block(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The whole conversation with a breakpoint on its last block."""
    last = messages[-1]
    text = last.content if isinstance(last.content, str) else last.text
    marked = last.model_copy(
        update={"content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]}
    )
    return [*messages[:-1], marked]


def play(
    chain: Runnable[Any, Any],
    run: Run,
    tag: str,
    after_turn: Callable[[], None] = lambda: None,
) -> None:
    for i in range(1, TURNS + 1):
        reply = chain.invoke(turn_text(i, tag), config={"configurable": {"session_id": f"lc-{tag}"}})
        assert isinstance(reply, AIMessage)
        run.record(reply)
        after_turn()


def requests_of(stack: Any, tag: str) -> list[dict[str, Any]]:
    """The requests the stand-in received from one chain, oldest first (the log is
    shared with other tests: each chain's text holds a tag of its own)."""
    return [
        c["body"]
        for c in stack.standin_log()
        if c["status"] == 200
        and isinstance(c["body"], dict)
        and not any(
            "degrau:summarize" in b.get("text", "") for b in c["body"].get("system") or [] if isinstance(b, dict)
        )
        and f"[{tag}]" in str(c["body"].get("messages", [])[-1:])
    ]


def test_sixty_turns_through_runnable_with_message_history_stay_bounded_and_remember(
    stack: Any, client: DegrauClient, tenant: str
) -> None:
    stack.configure(tenant, {"compaction_threshold_tokens": THRESHOLD, "window_keep_messages": 6})
    tags = {name: uuid.uuid4().hex[:8] for name in ("degrau", "full", "cached")}

    histories: list[DegrauChatMessageHistory] = []

    def degrau_history(session_id: str) -> BaseChatMessageHistory:
        histories.append(DegrauChatMessageHistory(client, session_id))
        return histories[-1]

    waits_timed_out = 0

    def wait_for_a_queued_step() -> None:
        """A step queued by the round just committed lands before the next turn, as
        it does when a person takes seconds to answer (bounded)."""
        nonlocal waits_timed_out
        recorded = histories[-1].last_recorded
        assert recorded is not None
        if not recorded["compaction_queued"]:
            return
        contact = histories[-1].contact
        steps = client.memory(contact)["session"]["steps"]
        deadline = time.monotonic() + STEP_WAIT_SECONDS
        while client.memory(contact)["session"]["steps"] <= steps:
            if time.monotonic() > deadline:
                waits_timed_out += 1
                return
            time.sleep(0.25)

    degrau = Run("degrau history")
    play(
        RunnableWithMessageHistory(model(stack), degrau_history),
        degrau,
        tags["degrau"],
        wait_for_a_queued_step,
    )  # type: ignore[arg-type]

    stores: dict[str, InMemoryChatMessageHistory] = {}

    def in_memory(session_id: str) -> BaseChatMessageHistory:
        return stores.setdefault(session_id, InMemoryChatMessageHistory())

    full = Run("full history (InMemoryChatMessageHistory)")
    play(RunnableWithMessageHistory(model(stack), in_memory), full, tags["full"])  # type: ignore[arg-type]
    cached = Run("full history, breakpoint on the last block")
    play(
        RunnableWithMessageHistory(RunnableLambda(mark_last_block) | model(stack), in_memory),
        cached,
        tags["cached"],
    )  # type: ignore[arg-type]

    contact = f"lc-{tags['degrau']}"
    memory = client.memory(contact)
    assert waits_timed_out == 0
    assert memory["session"]["steps"] >= 3, memory["session"]
    assert memory["session"]["summary"] and order_code(tags["degrau"]) in memory["session"]["summary"]
    assert memory["session"]["last_seq"] == 2 * TURNS, "every turn one round"

    # Bounded: each request holds at most the threshold plus the round that passed it
    # (the largest growth from one turn to the next), wherever in the conversation.
    growth = max(b - a for a, b in zip(degrau.sent, degrau.sent[1:], strict=False))
    assert max(degrau.sent) <= THRESHOLD + growth, (max(degrau.sent), growth)
    assert max(degrau.sent[TURNS // 2 :]) <= THRESHOLD + growth
    assert full.sent[-1] > 2 * max(degrau.sent), "the full history grows past it"

    # The order code of turn 2 reaches the model at turn 60 in the summary, not the window.
    sent = requests_of(stack, tags["degrau"])
    assert len(sent) == TURNS
    last = sent[-1]
    code = order_code(tags["degrau"])
    assert code in last["system"][1]["text"]
    assert code not in str(last["messages"])
    assert len(last["messages"]) < 2 * TURNS - 1
    assert sum(1 for b in last["system"] if "cache_control" in b) == 2

    full_sent, cached_sent = (
        requests_of(stack, tags["full"]),
        requests_of(stack, tags["cached"]),
    )
    assert len(full_sent) == len(cached_sent) == TURNS
    assert len(full_sent[-1]["messages"]) == 2 * TURNS - 1
    assert degrau.cache_read_ratio > full.cache_read_ratio

    baseline = full
    table = "\n".join(
        [
            f"| chain | input tokens, {TURNS} turns | vs full | largest request | turn {TURNS} | most messages | cache read | cache written | cache read ratio | input cost | vs full |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            degrau.row(sent, baseline),
            full.row(full_sent, baseline),
            cached.row(cached_sent, baseline),
        ]
    )
    per_turn = "\n".join(
        f"| {i} | {d:,} | {f:,} | {c:,} |"
        for i, (d, f, c) in enumerate(zip(degrau.sent, full.sent, cached.sent, strict=True), 1)
    )
    report = f"""# LangChain: degrau's history against the full history

Written by `DEGRAU_BENCH_RESULTS=1 pytest clients/python/tests/test_langchain_sixty_turns.py`
against the local stack (the tests alone print the table and write nothing).
`clients/python/tests/test_langchain_sixty_turns.py`: {TURNS} turns through
`RunnableWithMessageHistory` with `ChatAnthropic` (langchain-anthropic) against the
offline stand-in (its own token count, a quarter of the characters, and its prompt
caching simulation; minimum cacheable prefix 1,024 tokens), tenant threshold
{THRESHOLD:,} tokens and `window_keep_messages` 6. A step queued by a round lands
before the next turn (as with a person answering seconds later). Input tokens are
each request's whole input (uncached, read and written), from the responses' usage;
input cost prices them in uncached tokens (cache reads 0.1×, five-minute writes
1.25×, one-hour writes 2×).
{memory["session"]["steps"]} steps landed; the order code said at turn 2 reached the
model at turn {TURNS} in the summary (`system[1]`), not in the window.

{table}

Input tokens sent per turn:

| turn | degrau history | full history | full history, cached |
|---:|---:|---:|---:|
{per_turn}
"""
    print("\n" + table)
    if os.environ.get("DEGRAU_BENCH_RESULTS") == "1":
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(report)

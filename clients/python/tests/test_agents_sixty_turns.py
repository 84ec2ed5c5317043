"""Sixty turns on the local stack, the way LangChain's own docs write agents today,
each with degrau as its memory, against the offline stand-in (``ChatAnthropic``
pointed at it):

- a chain that ends in ``StrOutputParser`` (prompt | model | parser) under
  ``RunnableWithMessageHistory``: the history gets a bare string, no usage, so
  degrau estimates every round's context (``usage_estimated``) and steps land all
  the same;
- a LangChain 1.x agent (``create_agent``) with ``DegrauMiddleware`` and the
  agent's own scheduling tools, sync, and a few turns of it async on an
  ``AsyncDegrauClient``.

Each shows steps landing, the window bounded, and the order code said at turn 2
reaching the model at turn 60 through the summary (in ``system[1]``, not in the
window)."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from typing import Any

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import tool

from degrau_client import AsyncDegrauClient, DegrauClient
from degrau_client.agents import DegrauMiddleware
from degrau_client.langchain import DegrauChatMessageHistory
from openapi_check import AsyncCheckedTransport

TURNS = 60
THRESHOLD = 2_000
STEP_WAIT_SECONDS = 600


def model(stack: Any) -> ChatAnthropic:
    return ChatAnthropic(  # type: ignore[call-arg]
        model="claude-sonnet-4-5", base_url=stack.standin, api_key="offline-stand-in", max_retries=0, max_tokens=1024
    )


def order_code(tag: str) -> str:
    return f"ORD-{tag.upper()}-7731"


def turn_text(i: int, tag: str) -> str:
    """Turn ``i`` (1-based): the order code at turn 2, the question about it at the
    last turn, an availability question every tenth turn (a tool round for the
    agent), small talk otherwise."""
    if i == 2:
        return f"turn {i:02} [{tag}]: my order code is {order_code(tag)}, please keep it in mind."
    if i == TURNS:
        return f"turn {i:02} [{tag}]: which order code did I give you at the start?"
    if i % 10 == 5:
        return f"turn {i:02} [{tag}]: any free slots on 2026-12-04?"
    return f"turn {i:02} [{tag}]: tell me something about the shop's history and its owners, nothing urgent."


def wait_for_steps(client: DegrauClient, contact: str, recorded: dict[str, Any] | None, steps_before: int) -> None:
    """A step queued by the round just committed lands before the next turn, as when
    a person takes seconds to answer (bounded)."""
    if not recorded or not recorded["compaction_queued"]:
        return
    deadline = time.monotonic() + STEP_WAIT_SECONDS
    while client.memory(contact)["session"]["steps"] <= steps_before:
        assert time.monotonic() < deadline, "a queued step never landed"
        time.sleep(0.25)


def requests_of(stack: Any, tag: str) -> list[dict[str, Any]]:
    """The answer requests the stand-in received for one conversation (its tag in the
    last user message), oldest first; the last of each turn is its final call."""
    return [
        call["body"]
        for call in stack.standin_log()
        if call["status"] == 200
        and isinstance(call["body"], dict)
        and not any("degrau:" in b.get("text", "")[:8] for b in call["body"].get("system") or [] if isinstance(b, dict))
        and f"[{tag}]" in str([m for m in call["body"].get("messages", []) if m["role"] == "user"][-1:])
    ]


def assert_remembered_through_the_summary(stack: Any, client: DegrauClient, contact: str, tag: str) -> None:
    memory = client.memory(contact)
    assert memory["session"]["steps"] >= 3, memory["session"]
    code = order_code(tag)
    assert code in (memory["session"]["summary"] or "")
    last = requests_of(stack, tag)[-1]
    assert "which order code" in str(last["messages"])
    assert any(code in b["text"] for b in last["system"]), "the code reaches turn 60 in the system blocks"
    assert code not in str(last["messages"]), "...not in the window"


def bounded(contexts: list[int]) -> None:
    """Each request's context stays within the threshold plus the largest growth of
    one turn, wherever in the conversation."""
    growth = max(b - a for a, b in itertools.pairwise(contexts))
    assert max(contexts) <= THRESHOLD + growth, (max(contexts), growth)
    assert max(contexts[len(contexts) // 2 :]) <= THRESHOLD + growth


def test_a_chain_ending_in_a_parser_compacts_on_estimated_usage_over_sixty_turns(
    stack: Any, client: DegrauClient, tenant: str
) -> None:
    stack.configure(tenant, {"compaction_threshold_tokens": THRESHOLD, "window_keep_messages": 6})
    tag = uuid.uuid4().hex[:8]
    contact = f"parser-{tag}"
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
    histories: list[DegrauChatMessageHistory] = []

    def history(session_id: str) -> DegrauChatMessageHistory:
        histories.append(DegrauChatMessageHistory(client, session_id))
        return histories[-1]

    chain = RunnableWithMessageHistory(
        prompt | model(stack) | StrOutputParser(),  # type: ignore[arg-type]
        history,  # type: ignore[arg-type]
        input_messages_key="question",
        history_messages_key="history",
    )
    estimated: list[int] = []
    for i in range(1, TURNS + 1):
        steps = client.memory(contact)["session"]["steps"] if i > 1 else 0
        answer = chain.invoke({"question": turn_text(i, tag)}, config={"configurable": {"session_id": contact}})
        assert isinstance(answer, str) and answer, "the chain answers a string"
        recorded = histories[-1].last_recorded
        assert recorded is not None and recorded["usage_estimated"] is True, "no usage reached the history"
        estimated.append(recorded["usage"]["context_tokens"])
        wait_for_steps(client, contact, recorded, steps)

    # What the stand-in counted for the same requests: the estimate is its count.
    sent = requests_of(stack, tag)
    assert len(sent) == TURNS
    log = [c for c in stack.standin_log() if isinstance(c.get("body"), dict) and c["body"] in sent]
    measured = [
        c["usage"]["input_tokens"] + c["usage"]["cache_read_input_tokens"] + c["usage"]["cache_creation_input_tokens"]
        for c in log
    ]
    assert len(measured) == TURNS
    worst = max(abs(e - m) / m for e, m in zip(estimated, measured, strict=True))
    print(f"\nparser chain: the estimate's largest error against the stand-in's count: {worst:.2%}")
    assert worst < 0.05
    bounded(measured)
    assert client.memory(contact)["session"]["last_seq"] == 2 * TURNS, "every turn one round"
    assert_remembered_through_the_summary(stack, client, contact, tag)


@tool
def list_free_slots(day: str) -> list[str]:
    """Lists the free slots of a day (YYYY-MM-DD) at the barber shop."""
    return ["09:00", "10:30", "14:00"]


@tool
def book_slot(day: str, time: str) -> str:
    """Books a slot (day YYYY-MM-DD, time HH:MM); answers a confirmation code."""
    return f"BK-{day}-{time}"


#: The agent's own tools (the stand-in calls them on availability words).
TOOLS = [list_free_slots, book_slot]


def test_a_langchain_1x_agent_with_the_middleware_remembers_over_sixty_turns(
    stack: Any, client: DegrauClient, tenant: str
) -> None:
    stack.configure(tenant, {"compaction_threshold_tokens": THRESHOLD, "window_keep_messages": 6})
    tag = uuid.uuid4().hex[:8]
    contact = f"agent-{tag}"
    agent = create_agent(
        model(stack),
        tools=TOOLS,
        system_prompt="You are the shop's assistant.",
        middleware=[DegrauMiddleware(client)],
    )
    contexts: list[int] = []
    tool_rounds = 0
    for i in range(1, TURNS + 1):
        steps = client.memory(contact)["session"]["steps"] if i > 1 else 0
        state = agent.invoke(
            {"messages": [{"role": "user", "content": turn_text(i, tag)}]}, context={"contact": contact}
        )
        recorded = state["degrau_recorded"]
        assert recorded["usage_estimated"] is False, "ChatAnthropic's usage reached degrau"
        contexts.append(recorded["usage"]["context_tokens"])
        tool_rounds += any(getattr(m, "tool_calls", None) for m in state["messages"])
        wait_for_steps(client, contact, recorded, steps)

    assert tool_rounds == TURNS // 10, "every availability question ran the agent's own tool"
    stored = client.transcript_messages(contact)
    assert any(b["type"] == "tool_use" and b["name"] == "list_free_slots" for m in stored for b in m["content"])
    last = requests_of(stack, tag)[-1]
    assert last["system"][0]["text"] == "You are the shop's assistant.", "the agent's own prompt first"
    assert any("<contact_context>" in b["text"] for b in last["system"])
    bounded(contexts)
    assert_remembered_through_the_summary(stack, client, contact, tag)


def test_the_middleware_serves_an_async_agent_on_the_async_client(stack: Any, tenant: str) -> None:
    async def run() -> None:
        async with AsyncDegrauClient(stack.api, tenant=tenant, transport=AsyncCheckedTransport()) as degrau:
            agent = create_agent(model(stack), tools=TOOLS, middleware=[DegrauMiddleware(degrau)])
            for i in range(1, 6):
                state = await agent.ainvoke(
                    {"messages": [{"role": "user", "content": turn_text(i, "async")}]},
                    context={"contact": "async-agent"},
                )
                assert state["degrau_recorded"]["round"]["first_seq"] >= 1
            memory = await degrau.memory("async-agent")
            assert memory["session"]["last_seq"] >= 10

    asyncio.run(run())

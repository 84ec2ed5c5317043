"""The LangGraph example (examples/langgraph_agent.py) on the local stack: its
rounds, tool rounds included, committed whole through the degrau nodes, steps
landing, and the facts store over the operator routes; the same graph on the
async client."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic

from degrau_client import AsyncDegrauClient, DegrauClient, InvalidRequest
from degrau_client.langgraph import DegrauFactsStore
from openapi_check import AsyncCheckedTransport

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import langgraph_agent

TURNS = 24


def test_a_graph_keeps_its_conversation_in_degrau_with_tool_rounds_and_steps(
    stack: Any, client: DegrauClient, tenant: str
) -> None:
    stack.configure(tenant, {"compaction_threshold_tokens": 2_000, "window_keep_messages": 6})
    model = ChatAnthropic(  # type: ignore[call-arg]
        model="claude-sonnet-4-5",
        base_url=stack.standin,
        api_key="offline-stand-in",
        max_retries=0,
    )
    graph = langgraph_agent.build_graph(client, model)
    config = {"configurable": {"contact": "gil"}}
    queued = 0
    for i in range(TURNS):
        state = graph.invoke({"messages": [("user", langgraph_agent.turn_text(i))]}, config=config)
        assert state["messages"][-1].text.startswith("[offline stand-in]")
        queued += state["degrau_recorded"]["compaction_queued"]

    stored = client.transcript_messages("gil")
    tool_rounds = sum(1 for m in stored if any(b["type"] == "tool_use" for b in m["content"]))
    assert tool_rounds == 2 * TURNS // 3, "every availability question and booking ran a tool"
    assert len(stored) == 2 * TURNS + 2 * tool_rounds, "each run one whole round"
    assert queued >= 1
    deadline = time.monotonic() + 600
    while client.memory("gil")["session"]["steps"] == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    session = client.memory("gil")["session"]
    assert session["steps"] >= 1 and session["summary"]
    assert len(client.context("gil")["messages"]) < len(stored), "the window starts after the summary"

    operator = stack.client(tenant, scopes=("memory:read", "memory:write"))
    stack.configure(
        tenant, {"compaction_threshold_tokens": 2_000, "window_keep_messages": 6, "allowed_fact_keys": ["name"]}
    )
    store = DegrauFactsStore(operator)
    # The stand-in extracts no facts: nothing yet; an operator's write through the
    # store reaches the contact's context, and a delete removes it.
    assert store.search(("facts", "gil")) == []
    assert store.get(("facts", "gil"), "name") is None
    assert store.get(("facts", "nobody-here"), "name") is None
    store.put(("facts", "gil"), "name", {"value": "Gil"})
    item = store.get(("facts", "gil"), "name")
    assert item is not None and item.value["value"] == "Gil" and item.value["set_by"]["kind"] == "operator"
    assert [i.key for i in store.search(("facts", "gil"), filter={"value": "Gil"})] == ["name"]
    assert "Gil" in client.context("gil")["system"][1]["text"]
    assert ("facts", "gil") in store.list_namespaces(prefix=("facts",))
    with pytest.raises(InvalidRequest):
        store.put(("facts", "gil"), "favourite_colour", {"value": "blue"})
    with pytest.raises(ValueError):
        store.put(("facts", "gil"), "name", {"value": "Gil", "extra": 1})
    store.delete(("facts", "gil"), "name")
    assert store.get(("facts", "gil"), "name") is None
    with pytest.raises(NotImplementedError):
        store.search(("facts", "gil"), query="what is his name")


def test_the_async_nodes_and_store_serve_an_async_client(stack: Any, tenant: str) -> None:
    stack.configure(tenant, {"allowed_fact_keys": ["name"]})
    model = ChatAnthropic(  # type: ignore[call-arg]
        model="claude-sonnet-4-5", base_url=stack.standin, api_key="offline-stand-in", max_retries=0
    )

    async def run() -> None:
        async with AsyncDegrauClient(
            stack.api, tenant=tenant, scopes=("memory:read", "memory:write"), transport=AsyncCheckedTransport()
        ) as degrau:
            graph = langgraph_agent.build_graph(degrau, model)
            for i in range(3):
                state = await graph.ainvoke(
                    {"messages": [("user", langgraph_agent.turn_text(i))]}, config={"configurable": {"contact": "ivo"}}
                )
                assert state["degrau_recorded"]["round"]["first_seq"] >= 1
            store = DegrauFactsStore(degrau)
            await store.aput(("facts", "ivo"), "name", {"value": "Ivo"})
            item = await store.aget(("facts", "ivo"), "name")
            assert item is not None and item.value["value"] == "Ivo"
            assert (await degrau.memory("ivo"))["session"]["last_seq"] >= 6

    asyncio.run(run())

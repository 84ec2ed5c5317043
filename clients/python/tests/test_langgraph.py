"""The LangGraph example (examples/langgraph_agent.py) on the local stack: its
rounds, tool rounds included, committed whole through the degrau nodes, steps
landing, and the facts store's read-only view."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langgraph.store.base import PutOp

from degrau_client import DegrauClient
from degrau_client.langgraph import DegrauFactsStore

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

    store = DegrauFactsStore(client)
    # The stand-in extracts no facts: the view reads an empty list, and refuses writes.
    assert store.search(("facts", "gil")) == []
    assert store.get(("facts", "gil"), "name") is None
    assert store.get(("facts", "nobody-here"), "name") is None
    with pytest.raises(NotImplementedError):
        store.put(("facts", "gil"), "name", {"value": "Gil"})
    with pytest.raises(NotImplementedError):
        store.batch([PutOp(("facts", "gil"), "name", None)])

"""A LangGraph agent whose conversation memory is degrau.

The graph: ``degrau_load`` (the contact's context into the state) -> ``agent``
(``ChatAnthropic`` with the scheduling tools, on the context and this run's round)
<-> ``tools`` (LangGraph's ``ToolNode``) -> ``degrau_commit`` (the round committed
whole on the head read). No checkpointer: degrau keeps the conversation, stepped
into a summary as it grows. ``DegrauFactsStore`` gives the agent the contact's facts
as a LangGraph store (read and written through the operator routes).

Against the local stack and the offline stand-in (``./dev.sh start``)::

    ANTHROPIC_BASE_URL=http://127.0.0.1:4010 ANTHROPIC_API_KEY=offline \
      python clients/python/examples/langgraph_agent.py --api http://127.0.0.1:9000 --turns 20
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from agent_loop import book_slot, list_free_slots, turn_text
from langchain_anthropic import ChatAnthropic
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from degrau_client import AsyncDegrauClient, DegrauClient
from degrau_client.langgraph import (
    DegrauFactsStore,
    DegrauMemory,
    DegrauState,
    model_input,
)


@tool("list_free_slots")
def list_free_slots_tool(day: str) -> list[str]:
    """Lists the free slots of a day (YYYY-MM-DD) at the barber shop."""
    return list_free_slots(day)


@tool("book_slot")
def book_slot_tool(day: str, time: str, service: str = "haircut") -> dict[str, str]:
    """Books a slot (day YYYY-MM-DD, time HH:MM); answers a confirmation code."""
    return book_slot(day, time, service)


TOOLS = [list_free_slots_tool, book_slot_tool]


def build_graph(
    degrau: DegrauClient | AsyncDegrauClient, model: ChatAnthropic
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The agent's graph, its memory in degrau (the contact comes from
    ``config["configurable"]["contact"]``): sync nodes on a ``DegrauClient``, async
    ones (``graph.ainvoke``) on an ``AsyncDegrauClient``."""
    memory = DegrauMemory(degrau)
    bound = model.bind_tools(TOOLS)
    on_async = isinstance(degrau, AsyncDegrauClient)

    def agent(state: DegrauState) -> dict[str, Any]:
        return {"messages": [bound.invoke(model_input(state))]}

    async def aagent(state: DegrauState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(model_input(state))]}

    graph = StateGraph(DegrauState)
    graph.add_node("degrau_load", memory.aload if on_async else memory.load)
    graph.add_node("agent", aagent if on_async else agent)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_node("degrau_commit", memory.acommit if on_async else memory.commit)
    graph.add_edge(START, "degrau_load")
    graph.add_edge("degrau_load", "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "degrau_commit"})
    graph.add_edge("tools", "agent")
    graph.add_edge("degrau_commit", END)
    return graph.compile(store=DegrauFactsStore(degrau))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--api", default=os.environ.get("DEGRAU_API_URL", "http://127.0.0.1:9000"))
    parser.add_argument("--tenant", default="example", help="X-Tenant-Id (AUTH_MODE=dev)")
    parser.add_argument("--contact", default="example-graph-contact")
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    # ChatAnthropic reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL (the stand-in locally).
    model = ChatAnthropic(
        model_name="claude-sonnet-4-5",
        max_tokens_to_sample=1024,
        timeout=None,
        stop=None,
    )
    with DegrauClient(args.api, tenant=args.tenant) as degrau:
        graph = build_graph(degrau, model)
        for i in range(args.turns):
            state = graph.invoke(
                {"messages": [("user", turn_text(i))]},
                config={"configurable": {"contact": args.contact}},
            )
            print(f"{i:3}: {state['messages'][-1].text}")
        session = degrau.memory(args.contact)["session"]
    print(f"session {session['number']}: {session['last_seq']} messages, {session['steps']} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())

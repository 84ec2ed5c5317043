"""A LangChain 1.x agent (``create_agent``) whose conversation memory is degrau.

The agent's own model (``ChatAnthropic``) and its own scheduling tools; degrau
comes in as one middleware, ``DegrauMiddleware``: the contact's context (the
tenant's instructions, the facts, the stepped summary, the window) before the
model, the whole round committed after the run. No checkpointer: degrau keeps the
conversation, and ``clear`` (here ``--new-chat``) starts a new session while the
facts stay. ``tests/test_langchain_agent_example.py`` runs it on the local stack.

Against the local stack and the offline stand-in (``./dev.sh start``)::

    ANTHROPIC_BASE_URL=http://127.0.0.1:4010 ANTHROPIC_API_KEY=offline \\
      python clients/python/examples/langchain_agent.py --api http://127.0.0.1:9000 --turns 20
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from agent_loop import book_slot, list_free_slots, turn_text
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.tools import tool

from degrau_client import DegrauClient
from degrau_client.agents import DegrauMiddleware


@tool("list_free_slots")
def list_free_slots_tool(day: str) -> list[str]:
    """Lists the free slots of a day (YYYY-MM-DD) at the barber shop."""
    return list_free_slots(day)


@tool("book_slot")
def book_slot_tool(day: str, time: str, service: str = "haircut") -> dict[str, str]:
    """Books a slot (day YYYY-MM-DD, time HH:MM); answers a confirmation code."""
    return book_slot(day, time, service)


def build_agent(degrau: Any, model: ChatAnthropic) -> Any:
    """The agent: its model, its tools, degrau as its memory (the contact comes
    from the run's ``context={"contact": ...}``)."""
    return create_agent(
        model,
        tools=[list_free_slots_tool, book_slot_tool],
        system_prompt="You book haircuts at the barber shop. Be brief.",
        middleware=[DegrauMiddleware(degrau)],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--api", default=os.environ.get("DEGRAU_API_URL", "http://127.0.0.1:9000"))
    parser.add_argument("--tenant", default="example", help="X-Tenant-Id (AUTH_MODE=dev)")
    parser.add_argument("--contact", default="example-agent-contact")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--new-chat", action="store_true", help="close the contact's session first (facts stay)")
    args = parser.parse_args()
    # ChatAnthropic reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL (the stand-in locally).
    model = ChatAnthropic(model_name="claude-sonnet-4-5", max_tokens_to_sample=1024, timeout=None, stop=None)
    with DegrauClient(args.api, tenant=args.tenant) as degrau:
        if args.new_chat:
            closed = degrau.close_session(args.contact)
            print(f"closed session {closed['closed_session']}; the next round is session {closed['session']}")
        agent = build_agent(degrau, model)
        for i in range(args.turns):
            state = agent.invoke(
                {"messages": [{"role": "user", "content": turn_text(i)}]}, context={"contact": args.contact}
            )
            recorded = state["degrau_recorded"]
            print(f"{i:3}: {state['messages'][-1].text}  (session {recorded['session']}, seq {recorded['round']})")
        session = degrau.memory(args.contact)["session"]
    print(f"session {session['number']}: {session['last_seq']} messages, {session['steps']} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())

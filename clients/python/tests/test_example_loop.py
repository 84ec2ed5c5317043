"""The example agent loop (examples/agent_loop.py) plays 60 turns on the local
stack: its own model calls through the official SDK to the offline stand-in, its
own tools, degrau's context and rounds, and the compactor run by the bridge."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anthropic

from degrau_client import DegrauClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import agent_loop

TURNS = 60


def is_example_call(call: dict[str, Any], model_name: str) -> bool:
    """One of this run's model calls: the stand-in's log holds every client's calls
    (other tests may run this example at the same time), this run's carry its own
    model name."""
    body = call["body"] if isinstance(call["body"], dict) else {}
    tools = body.get("tools") or []
    return body.get("model") == model_name and any(t.get("name") == "list_free_slots" for t in tools)


def steps_after_the_queue_drains(client: DegrauClient, contact: str, queued: int) -> dict[str, Any]:
    """The memory once the bridge has run the steps queued (it polls the queue on
    its own: wait for it, bounded)."""
    # Bounded generously: under `cargo lambda watch` the compactor may still be
    # compiling when its first job arrives on a loaded machine.
    deadline = time.monotonic() + 600
    while True:
        memory = client.memory(contact)
        if memory["session"]["steps"] >= min(queued, 2) or time.monotonic() > deadline:
            return memory
        time.sleep(0.5)


def test_sixty_turns_with_tool_rounds_and_several_steps_and_every_request_accepted(
    stack: Any, client: DegrauClient, tenant: str
) -> None:
    stack.configure(tenant, {"compaction_threshold_tokens": 3_000, "window_keep_messages": 6})
    seen_before = len(stack.standin_log())
    model = anthropic.Anthropic(base_url=stack.standin, api_key="offline-stand-in", max_retries=0)

    # The stand-in answers any model name: this one tells this run's calls apart.
    model_name = f"{agent_loop.MODEL}-{tenant}"
    conversation = agent_loop.run_conversation(client, model, "zoe", TURNS, model_name=model_name)

    assert len(conversation.turns) == TURNS
    # Every availability question and every booking ran a tool round.
    assert conversation.tool_rounds == 2 * TURNS // 3
    assert all(t.reply.startswith("[offline stand-in]") for t in conversation.turns)
    assert conversation.compactions_queued >= 2
    memory = steps_after_the_queue_drains(client, "zoe", conversation.compactions_queued)
    assert memory["session"]["steps"] >= 2, memory
    assert memory["session"]["summary"], "a summary was written"
    assert memory["session"]["number"] == 1
    stored = sum(t.recorded["round"]["last_seq"] - t.recorded["round"]["first_seq"] + 1 for t in conversation.turns)
    assert memory["session"]["last_seq"] == stored == 2 * TURNS + 2 * conversation.tool_rounds

    # The window the next request carries starts after the summary. Steps still queued
    # may land meanwhile, but a step only moves summarized_until forward: the context
    # read now holds at most the messages after the summarized_until read above, and
    # fewer than the whole session.
    context = client.context("zoe")
    after_summary = memory["session"]["last_seq"] - memory["session"]["summarized_until"]
    assert 0 < len(context["messages"]) <= after_summary < memory["session"]["last_seq"], (
        len(context["messages"]),
        memory["session"],
    )
    assert context["messages"][0]["role"] == "user"

    calls = stack.standin_log()[seen_before:]
    assert [c["status"] for c in calls if c["status"] != 200] == [], "the stand-in accepted every request"
    assert sum(1 for c in calls if is_example_call(c, model_name)) == conversation.model_calls
    print(
        f"\n{TURNS} turns: {conversation.tool_rounds} tool rounds, {conversation.model_calls} model calls "
        f"from the example, {len(calls)} requests accepted by the stand-in, "
        f"{conversation.compactions_queued} steps queued, {memory['session']['steps']} steps landed"
    )

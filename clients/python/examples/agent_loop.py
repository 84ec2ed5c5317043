"""An agent that runs its own loop and keeps its memory in degrau.

Each turn: ``context`` (the system blocks and the window degrau keeps, with its
cache breakpoints) -> add the user message and the agent's own tools ->
``messages.create`` with the official ``anthropic`` SDK -> run the tools the model
asked for -> ... -> ``rounds`` with the whole round and the last call's usage.
degrau stores the round whole, steps the summary when the context grows, and keeps
the facts; the agent keeps its model calls and its tools.

Against the local stack and the offline stand-in (``./dev.sh start``)::

    ANTHROPIC_BASE_URL=http://127.0.0.1:4010 ANTHROPIC_API_KEY=offline \
      python clients/python/examples/agent_loop.py --api http://127.0.0.1:9000 --turns 60

The stand-in calls ``list_free_slots`` / ``book_slot`` when a message asks about
availability or a booking; this agent implements both.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import anthropic

from degrau_client import DegrauClient, RecordedRound

MODEL = "claude-sonnet-4-5"
# 2 + 2 x 8 = 18 messages: the most a round may hold (as in degrau's own loop).
MAX_TOOL_ROUNDS = 8

TOOLS: list[dict[str, Any]] = [
    {
        "name": "list_free_slots",
        "description": "Lists the free slots of a day at the barber shop.",
        "input_schema": {
            "type": "object",
            "properties": {"day": {"type": "string", "description": "YYYY-MM-DD"}},
            "required": ["day"],
        },
    },
    {
        "name": "book_slot",
        "description": "Books a slot; answers a confirmation code.",
        "input_schema": {
            "type": "object",
            "properties": {
                "day": {"type": "string"},
                "time": {"type": "string", "description": "HH:MM"},
                "service": {"type": "string"},
            },
            "required": ["day", "time"],
        },
    },
]


def list_free_slots(day: str) -> list[str]:
    """The agent's own tool: a deterministic day's free slots."""
    seed = int(hashlib.sha256(day.encode()).hexdigest(), 16)
    return [f"{9 + h:02d}:{'30' if (seed >> h) & 1 else '00'}" for h in range(8) if (seed >> (h + 8)) % 3]


def book_slot(day: str, time: str, service: str = "haircut") -> dict[str, str]:
    """The agent's own tool: books and answers a confirmation code."""
    code = hashlib.sha256(f"{day} {time} {service}".encode()).hexdigest()[:4].upper()
    return {"confirmation": f"BK-{code}", "day": day, "time": time, "service": service}


def run_tool(name: str, args: dict[str, Any]) -> tuple[str, bool]:
    """A tool's result as text, and whether it is an error."""
    try:
        if name == "list_free_slots":
            return json.dumps(list_free_slots(str(args["day"]))), False
        if name == "book_slot":
            return json.dumps(
                book_slot(str(args["day"]), str(args["time"]), str(args.get("service", "haircut")))
            ), False
        return f"unknown tool {name}", True
    except (KeyError, TypeError, ValueError) as err:
        return f"bad input for {name}: {err}", True


def stored_block(block: Any) -> dict[str, Any]:
    """An SDK content block as the Messages API shape degrau stores (only the
    fields of its type: the SDK's extra ``None`` fields are left out)."""
    data = block.model_dump() if hasattr(block, "model_dump") else dict(block)
    keep = {
        "text": ("type", "text"),
        "tool_use": ("type", "id", "name", "input"),
        "thinking": ("type", "thinking", "signature"),
        "redacted_thinking": ("type", "data"),
    }.get(data["type"])
    if keep is None:
        raise ValueError(f"a {data['type']} block: not one degrau stores")
    return {k: data[k] for k in keep if k in data}


def with_breakpoint(messages: list[dict[str, Any]], cache_control: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages with the context's breakpoint on the last block:
    with degrau's two system blocks and the one it put in the window (the
    previous request's end), four, the most the API takes."""
    last = messages[-1]
    content = [dict(b) for b in last["content"]]
    content[-1]["cache_control"] = dict(cache_control)
    return [*messages[:-1], {"role": last["role"], "content": content}]


@dataclass
class Turn:
    """What one turn did."""

    reply: str
    tool_rounds: int
    model_calls: int
    recorded: RecordedRound


def run_turn(
    degrau: DegrauClient,
    model: anthropic.Anthropic,
    contact: str,
    text: str,
    *,
    model_name: str = MODEL,
) -> Turn:
    """One user message through the agent's own loop, committed as one round."""
    context = degrau.context(contact)
    round_messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": text}]}]
    tool_rounds = 0
    while True:
        response = model.messages.create(
            model=model_name,
            max_tokens=1024,
            system=context["system"],  # type: ignore[arg-type]
            messages=with_breakpoint(  # type: ignore[arg-type]
                [*context["messages"], *round_messages], context["cache_control"]
            ),
            tools=TOOLS,  # type: ignore[arg-type]
        )
        content = [stored_block(b) for b in response.content]
        round_messages.append({"role": "assistant", "content": content})
        calls = [b for b in content if b["type"] == "tool_use"]
        if response.stop_reason != "tool_use" or not calls:
            break
        if tool_rounds == MAX_TOOL_ROUNDS:
            raise RuntimeError(f"more than {MAX_TOOL_ROUNDS} tool rounds in one turn")
        results = []
        for call in calls:
            output, is_error = run_tool(call["name"], call["input"])
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call["id"], "content": output}
            if is_error:
                result["is_error"] = True
            results.append(result)
        round_messages.append({"role": "user", "content": results})
        tool_rounds += 1
    recorded = degrau.commit_round(contact, context["head"], round_messages, response.usage)
    reply = "".join(b["text"] for b in round_messages[-1]["content"] if b["type"] == "text")
    return Turn(reply, tool_rounds, tool_rounds + 1, recorded)


def turn_text(i: int) -> str:
    """Turn ``i`` of a scheduling conversation: availability, bookings, small talk."""
    day = 1 + i % 9
    return [
        f"turn {i:03}: any free slots on 2026-12-0{day}?",
        f"turn {i:03}: please book 10:30 on 2026-12-0{day}",
        f"turn {i:03}: thanks, that works for me",
    ][i % 3]


@dataclass
class Conversation:
    """What a conversation did."""

    turns: list[Turn] = field(default_factory=list)

    @property
    def tool_rounds(self) -> int:
        return sum(t.tool_rounds for t in self.turns)

    @property
    def model_calls(self) -> int:
        return sum(t.model_calls for t in self.turns)

    @property
    def compactions_queued(self) -> int:
        return sum(1 for t in self.turns if t.recorded["compaction_queued"])


def run_conversation(
    degrau: DegrauClient, model: anthropic.Anthropic, contact: str, turns: int, *, model_name: str = MODEL
) -> Conversation:
    """``turns`` turns of :func:`turn_text`, one round each."""
    conversation = Conversation()
    for i in range(turns):
        conversation.turns.append(run_turn(degrau, model, contact, turn_text(i), model_name=model_name))
    return conversation


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", default=os.environ.get("DEGRAU_API_URL", "http://127.0.0.1:9000"))
    parser.add_argument("--tenant", default="example", help="X-Tenant-Id (AUTH_MODE=dev)")
    parser.add_argument("--token", default=os.environ.get("DEGRAU_TOKEN"), help="bearer token (AUTH_MODE=jwt)")
    parser.add_argument("--contact", default="example-contact")
    parser.add_argument("--turns", type=int, default=60)
    args = parser.parse_args()
    tenant = None if args.token else args.tenant
    # The SDK reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL (the stand-in locally).
    model = anthropic.Anthropic()
    with DegrauClient(args.api, tenant=tenant, token=args.token) as degrau:
        conversation = run_conversation(degrau, model, args.contact, args.turns)
        memory = degrau.memory(args.contact)
    last = conversation.turns[-1]
    print(f"last reply: {last.reply}")
    print(
        f"{len(conversation.turns)} turns, {conversation.tool_rounds} tool rounds, "
        f"{conversation.model_calls} model calls, {conversation.compactions_queued} steps queued; "
        f"session {memory['session']['number']}: {memory['session']['steps']} steps so far"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

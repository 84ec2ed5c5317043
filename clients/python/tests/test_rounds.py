"""context and rounds on the local stack: bad rounds refused with nothing changed,
idempotency, the errors the API answers, the description served."""

from __future__ import annotations

from typing import Any

import pytest

from degrau_client import (
    Conflict,
    DegrauClient,
    IdempotencyMismatch,
    InvalidRequest,
    TooLarge,
    Unauthenticated,
)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


USAGE = {"input_tokens": 120, "output_tokens": 12}


def tool_round(i: int, result: str = '["09:00", "10:30"]') -> list[dict[str, Any]]:
    call = f"toolu_py_{i}"
    return [
        user(f"turn {i}: any free slots on 2026-12-04?"),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": call, "name": "list_free_slots", "input": {"day": "2026-12-04"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": result}]},
        assistant(f"Turn {i}: 09:00 or 10:30."),
    ]


def snapshot(client: DegrauClient, contact: str) -> tuple[Any, Any, Any]:
    return (
        client.transcript_messages(contact, session="all"),
        client.memory(contact),
        client.context(contact),
    )


def test_a_round_commits_and_the_next_context_carries_it(client: DegrauClient) -> None:
    first = client.context("ana")
    assert first["opens_session"] is True and first["messages"] == []
    assert [b["type"] for b in first["system"]] == ["text", "text"]
    recorded = client.commit_round("ana", first["head"], tool_round(0), USAGE)
    assert recorded["round"] == {"first_seq": 1, "last_seq": 4}
    assert recorded["usage"]["context_tokens"] == 120
    context = client.context("ana")
    assert context["opens_session"] is False and context["head"] != first["head"]
    assert [m["role"] for m in context["messages"]] == ["user", "assistant", "user", "assistant"]
    # The previous request's end (its tool results) carries the breakpoint; the
    # client marks its own user message.
    assert context["messages"][-2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in context["messages"][-1]["content"][-1]
    # ...with the breakpoint the context names (a new contact: five minutes).
    assert context["cache_control"] == {"type": "ephemeral"}
    assert [m["seq"] for m in client.transcript_messages("ana")] == [1, 2, 3, 4]


def test_bad_rounds_get_the_documented_4xx_and_change_nothing(client: DegrauClient) -> None:
    stale = client.context("bea")["head"]
    client.commit_round("bea", stale, tool_round(0), USAGE)
    head = client.context("bea")["head"]
    before = snapshot(client, "bea")
    orphan = [
        user("hello"),
        assistant("Hi."),
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_nobody", "content": "42"}]},
        assistant("Sure."),
    ]
    cases: list[tuple[str, str, list[dict[str, Any]], type[Exception]]] = [
        ("orphan tool result", head, orphan, InvalidRequest),
        ("two user messages in a row", head, [user("one"), user("two"), assistant("Sure.")], InvalidRequest),
        ("a stale head", stale, [user("late"), assistant("Sure.")], Conflict),
        ("a body too large", head, tool_round(1, "x" * (300 * 1024)), TooLarge),
        ("no answer", head, [user("alone")], InvalidRequest),
    ]
    for name, on, messages, error in cases:
        with pytest.raises(error) as raised:
            client.commit_round("bea", on, messages, USAGE)
        assert raised.value.message, name
        assert snapshot(client, "bea") == before, f"{name} changed nothing"
    assert client.commit_round("bea", head, [user("fine"), assistant("Sure.")], USAGE)["round"]["first_seq"] == 5


def test_a_repeated_key_replays_and_the_same_key_with_another_body_is_refused(client: DegrauClient) -> None:
    head = client.context("cai")["head"]
    first = client.commit_round("cai", head, tool_round(0), USAGE, idempotency_key="round-0")
    again = client.commit_round("cai", head, tool_round(0), USAGE, idempotency_key="round-0")
    assert again == first
    assert client.memory("cai")["session"]["last_seq"] == 4
    with pytest.raises(IdempotencyMismatch) as raised:
        client.commit_round("cai", head, tool_round(1), USAGE, idempotency_key="round-0")
    assert raised.value.status == 422
    # Without the key, the same stale head is a conflict.
    with pytest.raises(Conflict):
        client.commit_round("cai", head, tool_round(0), USAGE)
    assert client.memory("cai")["session"]["last_seq"] == 4


def test_no_tenant_is_unauthenticated_and_the_description_is_public(stack: Any) -> None:
    with stack.client(None) as anonymous:
        with pytest.raises(Unauthenticated) as raised:
            anonymous.context("ana")
        assert raised.value.status == 401
        document = anonymous.openapi()
    assert document["openapi"].startswith("3.1")
    assert "/v1/contacts/{contact}/rounds" in document["paths"]


def test_a_history_written_by_degrau_loop_reads_the_same(client: DegrauClient) -> None:
    reply = client.send_message("dan", "hello there")
    assert reply["round"]["first_seq"] == 1
    context = client.context("dan")
    assert [m["role"] for m in context["messages"]] == ["user", "assistant"]
    recorded = client.commit_round("dan", context["head"], [user("and again"), assistant("Yes.")], USAGE)
    assert recorded["round"]["first_seq"] == 3
    assert client.erase("dan")["erased"] is True
    assert client.context("dan")["opens_session"] is True

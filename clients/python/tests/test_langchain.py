"""The LangChain message history on the local stack."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from degrau_client import DegrauClient
from degrau_client.langchain import DegrauChatMessageHistory


def test_rounds_added_through_the_history_read_back_with_their_usage(client: DegrauClient) -> None:
    history = DegrauChatMessageHistory(client, "lia")
    assert history.messages == []
    history.add_user_message("Hi, I am Lia.")
    assert [m.content for m in history.messages] == ["Hi, I am Lia."], "waiting for its reply"
    reply = AIMessage(
        content="Hello Lia!",
        usage_metadata={
            "input_tokens": 1_500,
            "output_tokens": 10,
            "total_tokens": 1_510,
            "input_token_details": {"cache_read": 1_000, "cache_creation": 200},
        },
    )
    history.add_message(reply)
    # LangChain's input_tokens count the cached ones: 300 uncached, 1,000 read, 200 written.
    assert client.memory("lia")["session"]["last_context_tokens"] == 1_500
    history.add_messages([HumanMessage("Any news?"), AIMessage("None yet.")])
    messages = history.messages
    assert [type(m) for m in messages] == [HumanMessage, AIMessage, HumanMessage, AIMessage]
    assert [m.content for m in messages] == ["Hi, I am Lia.", "Hello Lia!", "Any news?", "None yet."]
    memory = client.memory("lia")
    assert memory["session"]["last_seq"] == 4
    transcript = client.transcript_messages("lia")
    assert [m["seq"] for m in transcript] == [1, 2, 3, 4]


def test_tool_rounds_read_back_as_tool_calls_and_tool_messages(client: DegrauClient) -> None:
    head = client.context("max")["head"]
    client.commit_round(
        "max",
        head,
        [
            {"role": "user", "content": "Free on Friday?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "list_free_slots", "input": {"day": "2026-12-04"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": '["09:00"]'}]},
            {"role": "assistant", "content": "09:00 is free."},
        ],
        {"input_tokens": 50, "output_tokens": 5},
    )
    messages = DegrauChatMessageHistory(client, "max").messages
    assert [type(m) for m in messages] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert messages[1].tool_calls[0]["name"] == "list_free_slots"
    assert messages[2].tool_call_id == "toolu_1" and messages[2].content == '["09:00"]'


def test_what_it_cannot_express_is_refused_and_clear_erases(client: DegrauClient) -> None:
    history = DegrauChatMessageHistory(client, "noa")
    with pytest.raises(ValueError):
        history.add_message(AIMessage("an answer to nothing"))
    with pytest.raises(ValueError):
        history.add_message(SystemMessage("be brief"))
    history.add_user_message("question")
    with pytest.raises(ValueError):
        history.add_message(AIMessage("", tool_calls=[{"id": "t1", "name": "x", "args": {}}]))
    history.clear()
    history.add_messages([HumanMessage("hello"), AIMessage("hi")])
    assert len(history.messages) == 2
    history.clear()
    assert history.messages == []
    assert client.context("noa")["opens_session"] is True

"""The LangChain message history on the local stack (and, for the conflicts the
stack cannot be made to answer on cue, on a scripted transport)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from degrau_client import Conflict, DegrauClient, NotFound
from degrau_client.langchain import DegrauChatMessageHistory, messages_api_usage

USAGE = {"input_tokens": 50, "output_tokens": 5}


def plain_round(text: str, reply: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]


def test_messages_are_the_context_system_blocks_then_the_window(
    client: DegrauClient,
) -> None:
    history = DegrauChatMessageHistory(client, "lia")
    first = history.messages
    assert [type(m) for m in first] == [SystemMessage, SystemMessage], "a new contact: no window"
    assert "<contact_context>" in first[1].content[0]["text"]
    assert all(m.content[0]["cache_control"]["type"] == "ephemeral" for m in first)
    history.add_user_message("Hi, I am Lia.")
    assert history.messages[-1].content == "Hi, I am Lia.", "waiting for its reply"
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
    assert history.last_recorded is not None and history.last_recorded["round"] == {
        "first_seq": 1,
        "last_seq": 2,
    }
    history.add_messages([HumanMessage("Any news?"), AIMessage("None yet.")])

    messages = history.messages
    context = history.context
    assert context is not None
    assert [type(m) for m in messages] == [
        SystemMessage,
        SystemMessage,
        HumanMessage,
        AIMessage,
        HumanMessage,
        AIMessage,
    ]
    assert [m.content[0] for m in messages[:2]] == context["system"]
    window = messages[2:]
    assert [m.text for m in window] == [
        "Hi, I am Lia.",
        "Hello Lia!",
        "Any news?",
        "None yet.",
    ]
    # degrau's breakpoint on the previous request's last message, and the history's
    # own on the last block: the request's last part is cached for the next turn.
    assert window[2].content[-1]["cache_control"] == context["messages"][2]["content"][-1]["cache_control"]
    assert window[3].content[-1]["cache_control"] == context["cache_control"]
    marks = [b for m in messages if isinstance(m.content, list) for b in m.content if "cache_control" in b]
    assert len(marks) == 4
    assert [m["seq"] for m in client.transcript_messages("lia")] == [1, 2, 3, 4]

    plain = DegrauChatMessageHistory(client, "lia", anthropic_blocks=False).messages
    assert [m.content for m in plain[2:]] == [
        "Hi, I am Lia.",
        "Hello Lia!",
        "Any news?",
        "None yet.",
    ]
    assert isinstance(plain[0].content, str)


def test_messages_are_read_once_per_round(client: DegrauClient) -> None:
    history = DegrauChatMessageHistory(client, "ivo")
    before = history.messages
    client.commit_round("ivo", client.context("ivo")["head"], plain_round("elsewhere", "ok"), USAGE)
    assert history.messages == before, "the same context until the round is committed"


def test_a_tool_turn_is_one_round_and_reads_back_as_tool_calls(
    client: DegrauClient,
) -> None:
    history = DegrauChatMessageHistory(client, "max")
    _ = history.messages  # reads the context: the head the round is committed on
    calls = AIMessage(
        content=[
            {"type": "text", "text": "Let me check."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "list_free_slots",
                "input": {},
            },
        ],
        tool_calls=[{"id": "toolu_1", "name": "list_free_slots", "args": {"day": "2026-12-04"}}],
    )
    history.add_messages([HumanMessage("Free on Friday?"), calls])
    assert history.last_recorded is None, "the round waits for its final answer"
    history.add_messages([ToolMessage('["09:00"]', tool_call_id="toolu_1"), AIMessage("09:00 is free.")])

    stored = client.transcript_messages("max")
    assert [(m["role"], [b["type"] for b in m["content"]]) for m in stored] == [
        ("user", ["text"]),
        ("assistant", ["text", "tool_use"]),
        ("user", ["tool_result"]),
        ("assistant", ["text"]),
    ]
    assert stored[1]["content"][1]["input"] == {"day": "2026-12-04"}, "the parsed arguments"
    messages = history.messages[2:]
    assert [type(m) for m in messages] == [
        HumanMessage,
        AIMessage,
        ToolMessage,
        AIMessage,
    ]
    assert messages[1].tool_calls[0]["name"] == "list_free_slots"
    # The tool results are the previous request's last message: degrau's breakpoint
    # is on them, so the whole block goes to ChatAnthropic as it is.
    assert messages[2].tool_call_id == "toolu_1"
    assert messages[2].content == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": '["09:00"]',
            "cache_control": {"type": "ephemeral"},
        }
    ]
    plain = DegrauChatMessageHistory(client, "max", anthropic_blocks=False).messages[2:]
    assert plain[2].content == '["09:00"]' and plain[1].content == "Let me check."


def test_what_it_cannot_express_is_refused_with_nothing_committed(
    client: DegrauClient,
) -> None:
    history = DegrauChatMessageHistory(client, "noa")
    refused: list[list[Any]] = [
        [AIMessage("an answer to nothing")],
        [SystemMessage("be brief")],
        [HumanMessage("one"), HumanMessage("two")],
        [HumanMessage([{"type": "image", "url": "https://example.com/a.png"}])],
        [HumanMessage("q"), ToolMessage("x", tool_call_id="t9")],
        [
            HumanMessage("q"),
            AIMessage("", tool_calls=[{"id": "t1", "name": "x", "args": {}}]),
            AIMessage("done"),
        ],
        [
            HumanMessage("q"),
            AIMessage(
                [
                    {
                        "type": "server_tool_use",
                        "id": "s",
                        "name": "web_search",
                        "input": {},
                    }
                ]
            ),
        ],
        # A whole round first, then a refusal: neither is committed.
        [
            HumanMessage("fine"),
            AIMessage("fine"),
            HumanMessage("then"),
            HumanMessage("again"),
        ],
    ]
    for messages in refused:
        with pytest.raises(ValueError):
            history.add_messages(messages)
    assert client.context("noa")["opens_session"] is True, "nothing was stored"
    history.add_messages([HumanMessage("hello"), AIMessage("hi")])
    assert len(history.messages) == 4
    # clear() starts a new conversation: session 2, no window; erase() forgets.
    history.clear()
    assert len(history.messages) == 2
    assert client.context("noa")["session"] == 2
    assert client.memory("noa")["session"]["number"] == 2
    assert [m["session"] for m in client.transcript_messages("noa", session="all")] == [1, 1]
    history.erase()
    assert client.context("noa")["opens_session"] is True
    with pytest.raises(NotFound):
        client.memory("noa")


def test_a_round_landing_meanwhile_is_detected_and_the_round_committed_after_it(
    client: DegrauClient,
) -> None:
    history = DegrauChatMessageHistory(client, "eva")
    history.add_messages([HumanMessage("first"), AIMessage("one")])
    _ = history.messages  # the head the model's request is built from
    client.commit_round(
        "eva",
        client.context("eva")["head"],
        plain_round("from elsewhere", "two"),
        USAGE,
    )
    history.add_messages([HumanMessage("third"), AIMessage("three")])
    assert [m["content"][0]["text"] for m in client.transcript_messages("eva")] == [
        "first",
        "one",
        "from elsewhere",
        "two",
        "third",
        "three",
    ]


def test_a_contact_erased_meanwhile_is_a_conflict_and_nothing_is_stored(
    client: DegrauClient,
) -> None:
    history = DegrauChatMessageHistory(client, "rui")
    history.add_messages([HumanMessage("my order is ORD-1"), AIMessage("noted")])
    _ = history.messages  # reads the context: the head the round is committed on
    client.erase("rui")
    with pytest.raises(Conflict, match="erased"):
        history.add_messages([HumanMessage("and?"), AIMessage("ORD-1, as you said")])
    assert client.context("rui")["opens_session"] is True
    with pytest.raises(NotFound):
        client.memory("rui")


def scripted_client(answers: list[httpx.Response], seen: list[httpx.Request]) -> DegrauClient:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.pop(0)

    return DegrauClient("http://degrau.test", tenant="t", transport=httpx.MockTransport(handle))


CONTEXT = {
    "session": 1,
    "head": "h1.x.1.2.0",
    "opens_session": False,
    "system": [{"type": "text", "text": "be kind"}],
    "messages": [],
    "cache_control": {"type": "ephemeral"},
}


def conflict(message: str) -> httpx.Response:
    return httpx.Response(409, json={"error": {"type": "conflict", "message": message}})


def test_a_conflict_that_is_not_a_stale_head_is_raised_not_retried() -> None:
    seen: list[httpx.Request] = []
    answers = [
        httpx.Response(200, json=CONTEXT),
        conflict("another round for this contact landed since this head was read"),
        httpx.Response(200, json=CONTEXT),  # the same head: not stale after all
        conflict("a request with this Idempotency-Key is still in progress; retry later"),
    ]
    history = DegrauChatMessageHistory(scripted_client(answers, seen), "c")
    _ = history.messages  # reads the context: the head the round is committed on
    with pytest.raises(Conflict):
        history.add_messages([HumanMessage("q"), AIMessage("a")])
    assert [r.method for r in seen] == ["GET", "POST", "GET"]

    seen.clear()
    answers[:] = [
        httpx.Response(200, json=CONTEXT),
        conflict("a request with this Idempotency-Key is still in progress; retry later"),
    ]
    history = DegrauChatMessageHistory(scripted_client(answers, seen), "c")
    with pytest.raises(Conflict):
        history.add_messages([HumanMessage("q"), AIMessage("a")])
    assert [r.method for r in seen] == ["GET", "POST"]


def test_a_stale_head_is_retried_on_the_new_head_with_the_same_key_and_bounded() -> None:
    seen: list[httpx.Request] = []
    stale = conflict("another round for this contact landed since this head was read")
    answers = [httpx.Response(200, json=CONTEXT)]
    for n in range(3):
        answers += [
            stale,
            httpx.Response(200, json={**CONTEXT, "head": f"h1.x.1.{4 + 2 * n}.0"}),
        ]
    history = DegrauChatMessageHistory(scripted_client(answers, seen), "c", max_commit_attempts=3)
    with pytest.raises(Conflict):
        history.add_messages([HumanMessage("q"), AIMessage("a")])
    posts = [r for r in seen if r.method == "POST"]
    assert len(posts) == 3
    assert [json.loads(r.content)["head"] for r in posts] == [
        "h1.x.1.2.0",
        "h1.x.1.4.0",
        "h1.x.1.6.0",
    ]
    assert len({r.headers["idempotency-key"] for r in posts}) == 1


def test_usage_keeps_the_cache_write_split_langchain_anthropic_reports() -> None:
    message = AIMessage(
        "ok",
        usage_metadata={
            "input_tokens": 1_000,
            "output_tokens": 7,
            "total_tokens": 1_007,
            # langchain-anthropic zeroes cache_creation when it gives the split.
            "input_token_details": {
                "cache_read": 600,
                "cache_creation": 0,
                "ephemeral_5m_input_tokens": 100,
                "ephemeral_1h_input_tokens": 250,
            },
        },
    )
    assert messages_api_usage(message) == {
        "input_tokens": 50,
        "output_tokens": 7,
        "cache_read_input_tokens": 600,
        "cache_creation_input_tokens": 350,
        "cache_creation": {
            "ephemeral_5m_input_tokens": 100,
            "ephemeral_1h_input_tokens": 250,
        },
    }


def test_usage_is_the_apis_own_when_the_model_kept_it_and_none_when_nothing_carries_it() -> None:
    raw = {
        "input_tokens": 12,
        "output_tokens": 7,
        "cache_read_input_tokens": 900,
        "cache_creation_input_tokens": 30,
        "cache_creation": {"ephemeral_5m_input_tokens": 30, "ephemeral_1h_input_tokens": 0},
        "service_tier": "standard",
    }
    message = AIMessage(
        "ok",
        response_metadata={"usage": raw},
        usage_metadata={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    )
    assert messages_api_usage(message) == {k: v for k, v in raw.items() if k != "service_tier"}
    # What a chain ending in StrOutputParser hands its history: a bare string.
    assert messages_api_usage(AIMessage("just text")) is None

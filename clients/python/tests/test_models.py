"""Usage and content as the Anthropic SDK returns them, offline: what the client
sends for ``response.usage`` and ``response.content``."""

from __future__ import annotations

from anthropic.types import Message as SdkMessage
from anthropic.types import TextBlock, ToolUseBlock, Usage

from degrau_client import DegrauClient, message_from, usage_from
from scripted import FULL_USAGE, SENT_USAGE, Script, ok


def test_usage_as_the_api_returns_it_mapping_or_sdk_object() -> None:
    assert usage_from(FULL_USAGE) == SENT_USAGE
    assert usage_from(Usage.model_validate(FULL_USAGE)) == SENT_USAGE
    # Older responses: no split, null cache counts.
    old = {"input_tokens": 7, "output_tokens": 2, "cache_read_input_tokens": None, "cache_creation_input_tokens": None}
    assert usage_from(old) == {"input_tokens": 7, "output_tokens": 2}
    assert usage_from(Usage.model_validate(old)) == {"input_tokens": 7, "output_tokens": 2}


def test_sdk_content_blocks_and_messages_are_sent_in_the_api_shape() -> None:
    blocks = [
        TextBlock(type="text", text="Let me check.", citations=None),
        ToolUseBlock(type="tool_use", id="toolu_1", name="list_free_slots", input={"day": "2026-12-04"}),
    ]
    assert message_from({"role": "assistant", "content": blocks}) == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "list_free_slots", "input": {"day": "2026-12-04"}},
        ],
    }
    response = SdkMessage(
        id="msg_1",
        type="message",
        role="assistant",
        model="claude-sonnet-4-5",
        content=[TextBlock(type="text", text="09:00 or 10:30.")],
        stop_reason="end_turn",
        stop_sequence=None,
        usage=Usage.model_validate(FULL_USAGE),
    )
    assert message_from(response) == {"role": "assistant", "content": [{"type": "text", "text": "09:00 or 10:30."}]}
    # Mappings go as they are, string content too.
    plain = {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}
    assert message_from(plain) == plain
    assert message_from({"role": "user", "content": "hi"}) == {"role": "user", "content": "hi"}


def test_commit_round_sends_sdk_objects_converted() -> None:
    script = Script([ok()])
    usage = Usage.model_validate(FULL_USAGE)
    messages = [
        {"role": "user", "content": "any free slot?"},
        {"role": "assistant", "content": [TextBlock(type="text", text="09:00.", citations=None)]},
    ]
    DegrauClient("http://degrau.test", tenant="t", transport=script.transport()).commit_round(
        "ana", "h1", messages, usage
    )
    assert script.bodies() == [
        {
            "head": "h1",
            "messages": [
                {"role": "user", "content": "any free slot?"},
                {"role": "assistant", "content": [{"type": "text", "text": "09:00."}]},
            ],
            "usage": SENT_USAGE,
        }
    ]

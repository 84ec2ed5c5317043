"""The async client: offline, that it sends what the sync client sends for every
method, returns the same, raises the same errors and retries the same way; on the
local stack, a conversation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import date
from typing import Any

import httpx
import pytest

import degrau_client
from conftest import Stack
from degrau_client import AsyncDegrauClient, DegrauClient, DegrauError, RateLimited
from openapi_check import AsyncCheckedTransport
from scripted import FULL_USAGE, FakeTime, Script, error, ok
from test_errors import TYPES

USAGE = {"input_tokens": 10, "output_tokens": 5}
ROUND = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def api(request: httpx.Request) -> httpx.Response:
    """A stand-in API: an answer that names the request, and two transcript
    pages (the older one behind ``before=p2``)."""
    if request.url.path.endswith("/facts"):
        return ok({"facts": [{"path": request.url.raw_path.decode()}]})
    if request.url.path.endswith("/messages") and request.method == "GET":
        if request.url.params.get("before") == "p2":
            return ok({"messages": [{"seq": 1}, {"seq": 2}], "next_before": None})
        if "limit" not in request.url.params:
            return ok({"messages": [{"seq": 3}], "next_before": "p2"})
    return ok({"method": request.method, "path": request.url.raw_path.decode(), "body": request.content.decode()})


#: Every method of both clients, with the same arguments.
CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "send_message": (("ana", "hello"), {"idempotency_key": "k-1"}),
    "transcript": (("ana",), {"session": "all", "limit": 2, "before": "x"}),
    "transcript_messages": (("ana",), {"session": 3}),
    "memory": (("a b/c",), {}),
    "context": (("ana",), {}),
    "commit_round": (("ana", "h1", ROUND, USAGE), {"idempotency_key": "k-2"}),
    "search_sessions": (("ana", "corte com o Bruno"), {"limit": 3}),
    "erase": (("ana",), {}),
    "close_session": (("ana",), {}),
    "list_contacts": ((), {"limit": 5, "cursor": "c1"}),
    "list_facts": (("a b/c",), {}),
    "put_fact": (("ana", "name"), {"value": "Ana"}),
    "delete_fact": (("ana", "preferred_time"), {}),
    "get_tenant_config": ((), {}),
    "put_tenant_config": (({"session_idle_minutes": 60},), {"etag": '"v2"'}),
    "get_usage": ((date(2026, 12, 1), date(2026, 12, 3)), {}),
    "openapi": ((), {}),
}
#: Methods that return an iterator, not an answer (test_operate.py and
#: test_stream.py compare them).
ITERATORS = ("iter_contacts", "stream_message")


def seen(script: Script) -> list[tuple[str, str, str | None, bytes]]:
    """The requests, a key the client made (a uuid4, new per call) as ``<uuid4>``."""

    def key(value: str | None) -> str | None:
        return "<uuid4>" if value and len(value) == 36 and value.count("-") == 4 else value

    return [(r.method, str(r.url), key(r.headers.get("idempotency-key")), r.content) for r in script.requests]


def test_every_method_sends_and_returns_what_the_sync_client_does() -> None:
    assert sorted(CALLS) == sorted(
        name for name in vars(DegrauClient) if not name.startswith("_") and name not in ("close", *ITERATORS)
    )
    sync_script, async_script = Script([api]), Script([api])
    sync = DegrauClient("http://degrau.test", tenant="acme", transport=sync_script.transport())

    async def run_all() -> dict[str, Any]:
        async with AsyncDegrauClient(
            "http://degrau.test", tenant="acme", transport=async_script.async_transport()
        ) as client:
            return {name: await getattr(client, name)(*args, **kwargs) for name, (args, kwargs) in CALLS.items()}

    async_results = asyncio.run(run_all())
    sync_results = {name: getattr(sync, name)(*args, **kwargs) for name, (args, kwargs) in CALLS.items()}
    assert async_results == sync_results
    assert seen(async_script) == seen(sync_script)
    assert async_results["transcript_messages"] == [{"seq": 1}, {"seq": 2}, {"seq": 3}]
    assert async_results["memory"]["path"] == "/v1/contacts/a%20b%2Fc/memory"
    assert json.loads(async_results["commit_round"]["body"]) == {"head": "h1", "messages": ROUND, "usage": USAGE}
    assert all(r.headers["x-tenant-id"] == "acme" for r in async_script.requests)
    assert async_results["list_facts"] == [{"path": "/v1/contacts/a%20b%2Fc/facts"}]
    assert async_results["put_fact"]["method"] == "PUT" and json.loads(async_results["put_fact"]["body"]) == {
        "value": "Ana"
    }
    assert [r.headers.get("if-match") for r in async_script.requests if r.method == "PUT"] == [None, '"v2"']


def test_errors_are_the_same_classes_with_the_same_fields() -> None:
    for kind, status in TYPES.items():
        answer = error(status, kind, f"about {kind}", retry_after="2" if status in (429, 503) else None)
        sync = DegrauClient("http://degrau.test", retries=0, transport=Script([answer]).transport())
        with pytest.raises(DegrauError) as sync_raised:
            sync.context("ana")

        async def call(answer: httpx.Response = answer) -> None:
            async with AsyncDegrauClient(
                "http://degrau.test", retries=0, transport=Script([answer]).async_transport()
            ) as client:
                await client.context("ana")

        with pytest.raises(DegrauError) as async_raised:
            asyncio.run(call())
        assert type(async_raised.value) is type(sync_raised.value) is degrau_client.ERROR_CLASSES[kind]
        fields = ("status", "type", "message", "retry_after", "body")
        assert [getattr(async_raised.value, f) for f in fields] == [getattr(sync_raised.value, f) for f in fields]


def run_async(
    script: Script, time: FakeTime, call: Callable[[AsyncDegrauClient], Awaitable[Any]], **settings: Any
) -> Any:
    async def main() -> Any:
        async with AsyncDegrauClient(
            "http://degrau.test",
            transport=script.async_transport(),
            sleep=time.async_sleep,
            clock=time.clock,
            **settings,
        ) as client:
            return await call(client)

    return asyncio.run(main())


def test_retries_wait_retry_after_keep_the_post_key_and_are_bounded() -> None:
    script = Script([error(429, "rate_limited", retry_after="4"), httpx.ReadTimeout("slow"), ok({"done": 1})])
    time = FakeTime()
    assert run_async(script, time, lambda c: c.commit_round("ana", "h1", ROUND, USAGE)) == {"done": 1}
    assert time.slept[0] == 4.0 and len(time.slept) == 2
    keys = script.keys()
    assert len(keys) == 3 and keys[0] is not None and len(set(keys)) == 1
    script, time = Script([error(503, "unavailable", retry_after="20")]), FakeTime()
    with pytest.raises(degrau_client.Unavailable):
        run_async(script, time, lambda c: c.memory("ana"), deadline=45)
    assert time.slept == [20.0, 20.0] and len(script.requests) == 3
    script, time = Script([error(429, "rate_limited", retry_after="1")]), FakeTime()
    with pytest.raises(RateLimited):
        run_async(script, time, lambda c: c.erase("ana"), retries=2)
    assert len(script.requests) == 3
    script, time = Script([error(409, "conflict")]), FakeTime()
    with pytest.raises(degrau_client.Conflict):
        run_async(script, time, lambda c: c.send_message("ana", "hi", idempotency_key="mine"))
    assert script.keys() == ["mine"] and time.slept == []


def test_aclose_closes_the_connections() -> None:
    async def main() -> bool:
        client = AsyncDegrauClient("http://degrau.test", transport=Script([ok()]).async_transport())
        await client.memory("ana")
        await client.aclose()
        with pytest.raises(RuntimeError):
            await client.memory("ana")
        return True

    assert asyncio.run(main())


def test_a_conversation_on_the_stack(stack: Stack, tenant: str) -> None:
    """send_message, context, commit_round (usage as the API returns it, split
    included) and transcript, all awaited."""

    async def main() -> None:
        async with AsyncDegrauClient(
            stack.api, tenant=tenant, timeout=120, transport=AsyncCheckedTransport()
        ) as degrau:
            asked = await degrau.send_message("zoe", "Hi, I am Zoe. Any free slots on 2026-12-04?")
            assert asked["round"]["first_seq"] == 1 and asked["reply"]["text"]
            context = await degrau.context("zoe")
            assert context["opens_session"] is False
            assert [m["role"] for m in context["messages"]][:1] == ["user"]
            recorded = await degrau.commit_round(
                "zoe",
                context["head"],
                [
                    {"role": "user", "content": [{"type": "text", "text": "And on 2026-12-05?"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": "10:30 is free."}]},
                ],
                FULL_USAGE,
            )
            first = asked["round"]["last_seq"] + 1
            assert recorded["round"] == {"first_seq": first, "last_seq": first + 1}
            assert recorded["usage"]["context_tokens"] == 113
            page = await degrau.transcript("zoe", limit=2)
            texts = [b["text"] for m in page["messages"] for b in m["content"] if b["type"] == "text"]
            assert texts == ["And on 2026-12-05?", "10:30 is free."]
            everything = await degrau.transcript_messages("zoe")
            assert [m["seq"] for m in everything] == list(range(1, first + 2))
            found = await degrau.search_sessions("zoe", "slots", limit=2)
            assert found["sessions"] == []  # no closed session yet
            assert (await degrau.erase("zoe"))["erased"] is True

    asyncio.run(main())

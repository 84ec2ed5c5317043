"""The operator routes (contacts, facts, tenant configuration, usage): offline,
that each method sends the request ``docs/openapi.json`` describes and returns its
documented answer, with the dev scopes and operator as headers; on the local
stack, each route, its scope (403), the configuration's ``If-Match`` (412, 428),
the fact policy (a refused value is a 400 that does not quote it), and that a
corrected fact is what the model is sent next."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import date, datetime, timezone
from typing import Any

import httpx
import pytest

from conftest import ALL_SCOPES, Stack
from degrau_client import (
    AsyncDegrauClient,
    ContactSummary,
    DegrauClient,
    Forbidden,
    InvalidRequest,
    PreconditionFailed,
)
from openapi_check import AsyncCheckedTransport, CheckedTransport, Undescribed, documented, example
from scripted import Script, ok

BASE = "http://degrau.test"


def offline(**settings: Any) -> tuple[DegrauClient, list[httpx.Request]]:
    """A client of the documented API (see :func:`openapi_check.documented`), and
    the requests it sent."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return documented(request)

    return DegrauClient(BASE, retries=0, transport=httpx.MockTransport(handler), **settings), seen


def test_each_operator_method_sends_the_documented_request_and_returns_its_answer() -> None:
    client, seen = offline(tenant="acme")
    assert client.list_contacts(limit=5, cursor="c1") == example("listContacts")
    assert client.list_facts("+5511900000000") == example("listFacts")["facts"]
    assert client.put_fact("+5511900000000", "preferred_professional", "Rita") == example("putFact")
    assert client.delete_fact("+5511900000000", "preferred_professional") == example("deleteFact")
    assert client.get_tenant_config() == example("getTenantConfig")
    config = {"allowed_fact_keys": ["name"], "session_idle_minutes": 720}
    assert client.put_tenant_config(config, '"v3"') == example("putTenantConfig")
    assert client.get_usage(date(2026, 11, 27), date(2026, 12, 3)) == example("getUsage")
    assert client.get_usage() == example("getUsage")
    sent = [(r.method, r.url.raw_path.decode()) for r in seen]
    assert sent == [
        ("GET", "/v1/contacts?limit=5&cursor=c1"),
        ("GET", "/v1/contacts/%2B5511900000000/facts"),
        ("PUT", "/v1/contacts/%2B5511900000000/facts/preferred_professional"),
        ("DELETE", "/v1/contacts/%2B5511900000000/facts/preferred_professional"),
        ("GET", "/v1/tenant/config"),
        ("PUT", "/v1/tenant/config"),
        ("GET", "/v1/usage?from=2026-11-27&to=2026-12-03"),
        ("GET", "/v1/usage"),
    ]
    assert json.loads(seen[2].content) == {"value": "Rita"}
    assert seen[5].headers["if-match"] == '"v3"' and json.loads(seen[5].content) == config
    # Only the conditional change carries If-Match; no GET or DELETE carries a body.
    assert [r.headers.get("if-match") for r in seen].count('"v3"') == 1
    assert all(not r.content for r in seen if r.method in ("GET", "DELETE"))


def test_the_documented_api_refuses_what_the_document_does_not_describe() -> None:
    """The mock is a real check: a change without If-Match, or a fact without a
    value, is not a request the document describes."""
    with pytest.raises(Undescribed, match="If-Match"):
        documented(httpx.Request("PUT", f"{BASE}/v1/tenant/config", json={}))
    with pytest.raises(Undescribed, match="body"):
        documented(httpx.Request("PUT", f"{BASE}/v1/contacts/ana/facts/name", json={"value": ""}))
    with pytest.raises(Undescribed, match="limit"):
        documented(httpx.Request("GET", f"{BASE}/v1/contacts?limit=0"))


def test_dev_scopes_and_operator_are_sent_as_headers_and_only_when_given() -> None:
    client, seen = offline(tenant="acme", scopes=["memory:read", "tenant:admin"], operator="ops-7")
    client.list_contacts()
    DegrauClient(BASE, tenant="acme", scopes="memory:write", transport=httpx.MockTransport(documented)).list_contacts()
    plain, plain_seen = offline(tenant="acme")
    plain.list_contacts()
    headers = seen[0].headers
    assert (headers["x-tenant-id"], headers["x-scopes"], headers["x-operator"]) == (
        "acme",
        "memory:read tenant:admin",
        "ops-7",
    )
    assert "x-scopes" not in plain_seen[0].headers and "x-operator" not in plain_seen[0].headers


def contact_pages(request: httpx.Request) -> httpx.Response:
    """Three contacts over two pages (the second behind ``cursor=p2``)."""

    def summary(name: str, when: int) -> ContactSummary:
        return {"contact": name, "session": 1, "last_activity": when, "messages": 2, "facts": 0}

    if request.url.params.get("cursor") == "p2":
        return ok({"contacts": [summary("cid", 100)], "next_cursor": None})
    return ok({"contacts": [summary("ana", 300), summary("bea", 200)], "next_cursor": "p2"})


def test_iter_contacts_reads_the_pages_as_it_reaches_them_sync_and_async() -> None:
    script = Script([contact_pages])
    contacts = DegrauClient(BASE, transport=script.transport()).iter_contacts(limit=2)
    assert next(contacts)["contact"] == "ana"
    assert len(script.requests) == 1, "the second page is read only when reached"
    assert [c["contact"] for c in contacts] == ["bea", "cid"]
    assert [r.url.params.get("cursor") for r in script.requests] == [None, "p2"]
    assert {r.url.params["limit"] for r in script.requests} == {"2"}

    async_script = Script([contact_pages])

    async def main() -> list[str]:
        async with AsyncDegrauClient(BASE, transport=async_script.async_transport()) as client:
            return [c["contact"] async for c in client.iter_contacts(limit=2)]

    assert asyncio.run(main()) == ["ana", "bea", "cid"]
    assert [r.url for r in async_script.requests] == [r.url for r in script.requests]


# On the local stack.

REFUSED_VALUE = "has diabetes, books early"


def today() -> date:
    return datetime.now(timezone.utc).date()


def test_operating_a_tenant_on_the_stack(stack: Stack, tenant: str) -> None:
    """The configuration under If-Match, contacts, facts with provenance and
    history, a correction the model is sent next, and the day's usage."""
    with stack.client(tenant, scopes=ALL_SCOPES, operator="ops-7") as ops, stack.client(tenant) as chat:
        stored = ops.get_tenant_config()
        assert (stored["config"], stored["etag"], stored["valid"]) == (None, '"v0"', True)
        config = {"allowed_fact_keys": ["name", "preferred_professional"], "session_idle_minutes": 720}
        changed = ops.put_tenant_config(config, stored["etag"])
        assert changed["config"] == config and changed["etag"] == '"v1"' and changed["valid"] is True
        with pytest.raises(PreconditionFailed) as stale:
            ops.put_tenant_config({"session_idle_minutes": 60}, stored["etag"])
        assert stale.value.status == 412
        assert ops.get_tenant_config()["config"] == config, "the stale change wrote nothing"

        chat.send_message("ana", "Hi, I am Ana.")
        time.sleep(1.1)  # last activity is in seconds: Bea's is then surely the later
        chat.send_message("bea", "Hello, Bea here.")
        listed = ops.list_contacts()
        assert [c["contact"] for c in listed["contacts"]] == ["bea", "ana"], "most recently active first"
        assert listed["contacts"][1]["messages"] == 2 and listed["next_cursor"] is None
        assert [c["contact"] for c in ops.iter_contacts(limit=1)] == ["bea", "ana"]

        first = ops.put_fact("ana", "preferred_professional", "Rira")
        assert first["set_by"]["kind"] == "operator" and first["set_by"]["by"] == "ops-7"
        assert first["history"] == [] and first["expires_at"] is not None
        corrected = ops.put_fact("ana", "preferred_professional", "Rita")
        assert corrected["value"] == "Rita"
        assert [(h["value"], h["set_by"]["kind"]) for h in corrected["history"]] == [("Rira", "operator")]
        assert ops.list_facts("ana") == [corrected]

        # The next request to the model carries the correction.
        token = uuid.uuid4().hex
        chat.send_message("ana", f"Is my usual professional free tomorrow? ({token})")
        calls = [c for c in stack.standin_log() if token in json.dumps(c["body"].get("messages"))]
        assert calls, "the stand-in received the message"
        system = json.dumps(calls[0]["body"]["system"])
        assert "Rita" in system and "Rira" not in system

        assert ops.delete_fact("ana", "preferred_professional") == {"deleted": True, "key": "preferred_professional"}
        assert ops.list_facts("ana") == []

        usage = ops.get_usage(today(), today())
        assert usage["from"] == usage["to"] == today().isoformat()
        (day,) = usage["days"]
        assert day["rounds"] == 3 and day["model_calls"] >= 3
        assert sum(t["input"] + t["cache_write_5m"] + t["cache_write_1h"] + t["cache_read"] for t in day["tokens"]) > 0


def test_a_refused_fact_value_is_a_400_naming_the_rule_never_the_value(stack: Stack, tenant: str) -> None:
    with stack.client(tenant, scopes=ALL_SCOPES) as ops, stack.client(tenant) as chat:
        chat.send_message("cid", "Hi, I am Cid.")
        ops.put_fact("cid", "name", "Cid")
        with pytest.raises(InvalidRequest) as refused:
            ops.put_fact("cid", "name", REFUSED_VALUE)
        assert refused.value.status == 400
        assert "diabetes" not in refused.value.message.lower() and REFUSED_VALUE not in str(refused.value.body)
        with pytest.raises(InvalidRequest):
            ops.put_fact("cid", "favourite_colour", "blue")  # not an allowed key
        assert [(f["key"], f["value"]) for f in ops.list_facts("cid")] == [("name", "Cid")], "nothing changed"


def test_each_operator_route_needs_its_scope(stack: Stack, tenant: str) -> None:
    """403 and nothing changed, for a client without the scope the route needs."""
    with (
        stack.client(tenant, scopes=ALL_SCOPES) as ops,
        stack.client(tenant) as chat,
        stack.client(tenant, scopes=("memory:read",)) as reader,
    ):
        chat.send_message("dan", "Hi, I am Dan.")
        ops.put_fact("dan", "name", "Dan")
        for call in (
            lambda: chat.list_contacts(),
            lambda: chat.list_facts("dan"),
            lambda: reader.put_fact("dan", "name", "Daniel"),
            lambda: reader.delete_fact("dan", "name"),
            lambda: reader.get_tenant_config(),
            lambda: reader.put_tenant_config({}, '"v0"'),
            lambda: reader.get_usage(),
        ):
            with pytest.raises(Forbidden) as forbidden:
                call()
            assert forbidden.value.status == 403
        assert [(f["key"], f["value"]) for f in reader.list_facts("dan")] == [("name", "Dan")]
        assert ops.get_tenant_config()["etag"] == '"v0"'


def test_a_configuration_change_without_if_match_is_428(stack: Stack, tenant: str) -> None:
    headers = {"x-tenant-id": tenant, "x-scopes": "tenant:admin"}
    with httpx.Client(base_url=stack.api, headers=headers, transport=CheckedTransport(), timeout=60) as raw:
        answer = raw.put("/v1/tenant/config", json={"session_idle_minutes": 60})
    assert answer.status_code == 428
    assert answer.json()["error"]["type"] == "precondition_required"
    with stack.client(tenant, scopes=("tenant:admin",)) as admin:
        assert admin.get_tenant_config()["etag"] == '"v0"', "nothing was stored"


def test_usage_refuses_a_range_backwards_or_too_long(stack: Stack, tenant: str) -> None:
    with stack.client(tenant, scopes=("tenant:admin",)) as admin:
        assert admin.get_usage(today(), today())["days"] == []
        for start, end in ((date(2026, 12, 3), date(2026, 12, 1)), (date(2026, 1, 1), date(2026, 12, 1))):
            with pytest.raises(InvalidRequest):
                admin.get_usage(start, end)


def test_the_async_client_lists_contacts_and_facts_on_the_stack(stack: Stack, tenant: str) -> None:
    async def main() -> None:
        async with AsyncDegrauClient(
            stack.api,
            tenant=tenant,
            scopes=ALL_SCOPES,
            operator="ops-async",
            timeout=120,
            transport=AsyncCheckedTransport(),
        ) as ops:
            await ops.send_message("eva", "Hi, I am Eva.")
            fact = await ops.put_fact("eva", "name", "Eva")
            assert fact["set_by"]["by"] == "ops-async"
            assert [c["contact"] async for c in ops.iter_contacts()] == ["eva"]
            assert await ops.list_facts("eva") == [fact]

    asyncio.run(main())

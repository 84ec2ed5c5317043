"""The error envelope as exceptions, offline (httpx's mock transport)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

import degrau_client
from degrau_client import APIStatusError, DegrauClient, DegrauError, RateLimited, Unavailable, usage_from

TYPES = {
    "invalid_request": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "conflict": 409,
    "precondition_failed": 412,
    "too_large": 413,
    "unsupported_media_type": 415,
    "idempotency_mismatch": 422,
    "precondition_required": 428,
    "rate_limited": 429,
    "internal_error": 500,
    "tenant_config_invalid": 500,
    "model_error": 502,
    "model_refused": 502,
    "unavailable": 503,
    "model_timeout": 504,
}


def answering(status: int, body: object, headers: dict[str, str] | None = None) -> DegrauClient:
    """A client whose every request gets this answer, once (retries off: these
    tests are about the mapping; test_retry.py is about retries)."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body, headers=headers)

    return DegrauClient("http://degrau.test", tenant="t", retries=0, transport=httpx.MockTransport(handler))


def test_every_documented_error_type_has_its_class_carrying_status_type_and_message() -> None:
    with open(Path(__file__).resolve().parents[3] / "docs" / "openapi.json") as f:
        documented = json.load(f)["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["type"]["enum"]
    assert sorted(documented) == sorted(TYPES) == sorted(degrau_client.ERROR_CLASSES)
    for kind, status in TYPES.items():
        client = answering(status, {"error": {"type": kind, "message": f"about {kind}"}})
        with pytest.raises(degrau_client.ERROR_CLASSES[kind]) as raised:
            client.memory("ana")
        assert (raised.value.status, raised.value.type, raised.value.message) == (status, kind, f"about {kind}")
        assert raised.value.retry_after is None
        assert isinstance(raised.value, DegrauError)


def test_retry_after_is_carried_and_unknown_types_are_still_degrau_errors() -> None:
    client = answering(429, {"error": {"type": "rate_limited", "message": "slow"}}, {"retry-after": "3"})
    with pytest.raises(RateLimited) as raised:
        client.context("ana")
    assert raised.value.retry_after == 3
    client = answering(503, {"error": {"type": "unavailable", "message": "busy"}}, {"retry-after": "1"})
    with pytest.raises(Unavailable) as unavailable:
        client.erase("ana")
    assert unavailable.value.retry_after == 1
    client = answering(418, {"error": {"type": "teapot", "message": "no"}})
    with pytest.raises(DegrauError) as unknown:
        client.memory("ana")
    assert type(unknown.value) is APIStatusError and unknown.value.status == 418


def test_requests_carry_the_tenant_or_the_token_the_key_and_an_encoded_contact() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True})

    transport = httpx.MockTransport(handler)
    DegrauClient("http://degrau.test/", tenant="acme", transport=transport).commit_round(
        "a b/c", "h1", [], {"input_tokens": 1, "output_tokens": 2, "service_tier": "standard"}, idempotency_key="k-1"
    )
    DegrauClient("http://degrau.test", token="jwt-token", transport=transport).context("ana")
    first, second = seen
    assert first.url.raw_path == b"/v1/contacts/a%20b%2Fc/rounds"
    assert first.headers["x-tenant-id"] == "acme" and "authorization" not in first.headers
    assert first.headers["idempotency-key"] == "k-1"
    assert first.headers["content-type"] == "application/json"
    assert json.loads(first.content) == {"head": "h1", "messages": [], "usage": {"input_tokens": 1, "output_tokens": 2}}
    assert second.headers["authorization"] == "Bearer jwt-token" and "x-tenant-id" not in second.headers


def test_usage_is_taken_from_objects_with_its_attributes_or_mappings() -> None:
    class OtherUsage:
        input_tokens = 10
        output_tokens = 5
        cache_read_input_tokens = None
        cache_creation_input_tokens = 7
        service_tier = "standard"

    assert usage_from(OtherUsage()) == {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 7}
    assert usage_from({}) == {"input_tokens": 0, "output_tokens": 0}


def test_every_error_names_the_request_id_degrau_or_the_gateway_answered() -> None:
    for headers, want in (
        ({"request-id": "c0ffee-1"}, "c0ffee-1"),
        ({"apigw-requestid": "gw-2"}, "gw-2"),
        ({"x-amzn-RequestId": "rest-3"}, "rest-3"),
        ({}, None),
    ):
        client = answering(409, {"error": {"type": "conflict", "message": "stale"}}, headers)
        with pytest.raises(degrau_client.Conflict) as raised:
            client.context("ana")
        assert raised.value.request_id == want
        if want:
            assert want in str(raised.value)


def test_a_token_provider_is_asked_for_every_attempt_sync_and_async() -> None:
    import asyncio

    from scripted import FakeTime, Script, error, ok

    tokens = iter(["t-1", "t-2", "t-3"])
    script, time = Script([error(503, "unavailable", retry_after="1"), ok()]), FakeTime()
    DegrauClient(
        "http://degrau.test", token=lambda: next(tokens), transport=script.transport(), sleep=time.sleep
    ).memory("ana")
    assert [r.headers["authorization"] for r in script.requests] == ["Bearer t-1", "Bearer t-2"]

    calls = 0

    async def provider() -> str:
        nonlocal calls
        calls += 1
        return f"async-{calls}"

    async def run(token: object) -> list[str]:
        script, time = Script([error(429, "rate_limited", retry_after="1"), ok()]), FakeTime()
        async with degrau_client.AsyncDegrauClient(
            "http://degrau.test",
            token=token,
            transport=script.async_transport(),
            sleep=time.async_sleep,  # type: ignore[arg-type]
        ) as client:
            await client.memory("ana")
        return [r.headers["authorization"] for r in script.requests]

    assert asyncio.run(run(provider)) == ["Bearer async-1", "Bearer async-2"]
    assert asyncio.run(run(lambda: "plain")) == ["Bearer plain", "Bearer plain"]
    assert asyncio.run(run("fixed")) == ["Bearer fixed", "Bearer fixed"]
    with pytest.raises(TypeError):
        DegrauClient("http://degrau.test", token=lambda: None, transport=script.transport()).memory("ana")  # type: ignore[arg-type,return-value]

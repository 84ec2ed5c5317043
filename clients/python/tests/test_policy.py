"""The error and retry tables, held to their one source: ``docs/openapi.json``
(its error envelope's types and ``x-degrau-retry``, the retry policy both clients
generate from; the TypeScript client's ``test/unit/policy.test.ts`` holds it to the
same). The generated ``_schema.py`` must be what the generator makes of the
current document (the drift test), and the client must behave as the table says,
type by type."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import degrau_client
from degrau_client import APIConnectionError, AsyncDegrauClient, DegrauClient, DegrauError
from degrau_client._schema import RETRY_POLICY
from scripted import FakeTime, Script, error, ok

ROOT = Path(__file__).resolve().parents[3]
DOCUMENT = json.loads((ROOT / "docs" / "openapi.json").read_text())
POLICY = DOCUMENT["x-degrau-retry"]
#: The status of each type, from the document's responses (``x-error-types``).
STATUS = {
    kind: int(status)
    for status, response in DOCUMENT["paths"]["/v1/contacts/{contact}/context"]["get"]["responses"].items()
    if status != "200"
    for kind in DOCUMENT["components"]["responses"][response["$ref"].rsplit("/", 1)[-1]]["x-error-types"]
}


def _generator() -> Any:
    path = ROOT / "clients" / "python" / "scripts" / "generate_schema.py"
    spec = importlib.util.spec_from_file_location("generate_schema", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_types_and_policy_are_what_the_generator_makes_of_the_document() -> None:
    generator = _generator()
    generated = Path(degrau_client.__file__).with_name("_schema.py").read_text()
    assert generated == generator.generate(DOCUMENT), (
        "src/degrau_client/_schema.py is stale: run python clients/python/scripts/generate_schema.py"
    )


def test_every_documented_type_has_its_class_status_and_retry_decision() -> None:
    documented = DOCUMENT["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["type"]["enum"]
    assert list(degrau_client.ERROR_TYPES) == documented
    assert set(degrau_client.ERROR_CLASSES) == set(documented) == set(STATUS)
    assert set(POLICY["error_types"]) == set(documented)
    assert {k: v for k, v in POLICY.items() if k != "description"} == RETRY_POLICY


def _client(script: Script, time: FakeTime) -> DegrauClient:
    return DegrauClient(
        "http://degrau.test", tenant="t", transport=script.transport(), sleep=time.sleep, clock=time.clock
    )


@pytest.mark.parametrize("kind", sorted(POLICY["error_types"]))
def test_each_error_type_is_retried_exactly_as_the_policy_says(kind: str) -> None:
    script, time = Script([error(STATUS[kind], kind), ok({"n": 1})]), FakeTime()
    degrau = _client(script, time)
    if POLICY["error_types"][kind]:
        assert degrau.memory("ana") == {"n": 1}
        assert len(script.requests) == 2
    else:
        with pytest.raises(degrau_client.ERROR_CLASSES[kind]):
            degrau.memory("ana")
        assert len(script.requests) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 429, 500, 502, 503, 504])
def test_an_answer_without_the_envelope_is_retried_by_its_status(status: int) -> None:
    gateway = httpx.Response(status, json={"message": "Service Unavailable"})
    script, time = Script([gateway, ok({"n": 1})]), FakeTime()
    degrau = _client(script, time)
    if status in POLICY["statuses_without_envelope"]:
        assert degrau.memory("ana") == {"n": 1}
    else:
        with pytest.raises(DegrauError):
            degrau.memory("ana")
    assert len(script.requests) == (2 if status in POLICY["statuses_without_envelope"] else 1)


def test_the_bounds_are_the_policys() -> None:
    script, time = Script([error(503, "unavailable")]), FakeTime()
    with pytest.raises(degrau_client.Unavailable):
        _client(script, time).memory("ana")
    assert len(script.requests) == 1 + POLICY["max_retries"]
    # Equal jitter: each wait between half and all of its step.
    steps = [min(POLICY["max_backoff_seconds"], POLICY["initial_backoff_seconds"] * 2**n) for n in range(3)]
    assert all(step / 2 <= wait <= step for wait, step in zip(time.slept, steps, strict=True))
    script, time = Script([httpx.ConnectError("refused")]), FakeTime()
    with pytest.raises(APIConnectionError):
        _client(script, time).memory("ana")
    assert len(script.requests) == 1 + POLICY["max_retries"]


def test_the_async_client_follows_the_same_table() -> None:
    retried = [k for k, retry in POLICY["error_types"].items() if retry]
    not_retried = [k for k, retry in POLICY["error_types"].items() if not retry]

    async def attempts(kind: str) -> int:
        script, time = Script([error(STATUS[kind], kind), ok({"n": 1})]), FakeTime()
        async with AsyncDegrauClient(
            "http://degrau.test",
            tenant="t",
            transport=script.async_transport(),
            sleep=time.async_sleep,
            clock=time.clock,
        ) as degrau:
            with contextlib.suppress(DegrauError):
                await degrau.memory("ana")
        return len(script.requests)

    async def run() -> dict[str, int]:
        return {kind: await attempts(kind) for kind in POLICY["error_types"]}

    counts = asyncio.run(run())
    assert all(counts[k] == 2 for k in retried) and all(counts[k] == 1 for k in not_retried), counts

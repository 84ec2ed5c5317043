"""Offline helpers: a transport that answers from a script, and a clock whose
sleeps pass no real time."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

#: One scripted answer: a response, an exception the transport raises, or a
#: function of the request.
Step = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


#: A usage exactly as the Messages API returns it (its cache split, and fields
#: degrau does not use).
FULL_USAGE: dict[str, Any] = {
    "input_tokens": 10,
    "output_tokens": 5,
    "cache_creation_input_tokens": 3,
    "cache_read_input_tokens": 100,
    "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 3},
    "server_tool_use": None,
    "service_tier": "standard",
}
#: What ``rounds`` gets of it: the four counts and the split.
SENT_USAGE: dict[str, Any] = {
    "input_tokens": 10,
    "output_tokens": 5,
    "cache_creation_input_tokens": 3,
    "cache_read_input_tokens": 100,
    "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 3},
}


def error(status: int, kind: str, message: str = "scripted", retry_after: str | None = None) -> httpx.Response:
    headers = {"retry-after": retry_after} if retry_after is not None else None
    return httpx.Response(status, json={"error": {"type": kind, "message": message}}, headers=headers)


def ok(body: Any = None) -> httpx.Response:
    return httpx.Response(200, json={"ok": True} if body is None else body)


@dataclass
class Script:
    """Answers each request with the next step (the last one again once they run
    out) and keeps the requests."""

    steps: list[Step]
    requests: list[httpx.Request] = field(default_factory=list)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        step = self.steps[min(len(self.requests), len(self.steps)) - 1]
        if isinstance(step, Exception):
            raise step
        if isinstance(step, httpx.Response):
            # A fresh copy: a step may answer again, and a client consumes what it reads.
            return httpx.Response(step.status_code, headers=step.headers, content=step.content)
        return step(request)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self._answer)

    def async_transport(self) -> httpx.MockTransport:
        async def answer(request: httpx.Request) -> httpx.Response:
            await request.aread()
            return self._answer(request)

        return httpx.MockTransport(answer)

    def keys(self) -> list[str | None]:
        return [r.headers.get("idempotency-key") for r in self.requests]

    def bodies(self) -> list[Any]:
        return [json.loads(r.content) if r.content else None for r in self.requests]


@dataclass
class FakeTime:
    """``clock`` and ``sleep`` for a client: a sleep moves the clock, instantly."""

    now: float = 1000.0
    slept: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)

"""Retries, offline: which answers and failures are tried again, how long the
client waits (Retry-After in seconds or as an HTTP date, else backoff), the bound
on attempts and the deadline, and the Idempotency-Key that makes a POST safe to
send again."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import httpx
import pytest

from degrau_client import (
    APIConnectionError,
    APITimeoutError,
    DegrauClient,
    DegrauError,
    InvalidRequest,
    RateLimited,
    Unavailable,
    retry_after_seconds,
)
from scripted import FULL_USAGE, SENT_USAGE, FakeTime, Script, error, ok

USAGE = {"input_tokens": 10, "output_tokens": 5}
ROUND = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def client(script: Script, time: FakeTime, **settings: float) -> DegrauClient:
    return DegrauClient(
        "http://degrau.test",
        tenant="t",
        transport=script.transport(),
        sleep=time.sleep,
        clock=time.clock,
        **settings,  # type: ignore[arg-type]
    )


def test_a_429_waits_the_seconds_of_its_retry_after_then_succeeds() -> None:
    script, time = Script([error(429, "rate_limited", retry_after="7"), ok({"n": 1})]), FakeTime()
    assert client(script, time).memory("ana") == {"n": 1}
    assert time.slept == [7.0] and len(script.requests) == 2


def test_a_retry_after_http_date_waits_until_then() -> None:
    when = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    script, time = Script([error(429, "rate_limited", retry_after=when), ok()]), FakeTime()
    client(script, time).context("ana")
    # The date has whole seconds: 29 to 30 seconds from now.
    assert len(time.slept) == 1 and 28.5 <= time.slept[0] <= 30.0
    past = format_datetime(datetime.now(timezone.utc) - timedelta(seconds=30), usegmt=True)
    assert retry_after_seconds(past) == 0.0
    assert retry_after_seconds("soon") is None


def test_a_503_without_retry_after_backs_off_exponentially_with_jitter() -> None:
    script = Script([error(503, "unavailable"), error(503, "unavailable"), error(503, "unavailable"), ok()])
    time = FakeTime()
    assert client(script, time).erase("ana") == {"ok": True}
    assert len(script.requests) == 4 and [r.method for r in script.requests] == ["DELETE"] * 4
    # Equal jitter (x-degrau-retry): between half and all of 0.5 s, then 1 s, then 2 s.
    assert len(time.slept) == 3
    assert all(step / 2 <= wait <= step for wait, step in zip(time.slept, (0.5, 1.0, 2.0), strict=True))


def test_attempts_are_bounded_then_the_last_error_is_raised() -> None:
    script, time = Script([error(429, "rate_limited", retry_after="1")]), FakeTime()
    with pytest.raises(RateLimited) as raised:
        client(script, time).memory("ana")
    assert len(script.requests) == 4 and time.slept == [1.0, 1.0, 1.0]  # 3 retries by default
    assert raised.value.retry_after == 1.0
    script, time = Script([error(503, "unavailable", retry_after="1")]), FakeTime()
    with pytest.raises(Unavailable):
        client(script, time, retries=1).memory("ana")
    assert len(script.requests) == 2
    script, time = Script([error(503, "unavailable", retry_after="1")]), FakeTime()
    with pytest.raises(Unavailable):
        client(script, time, retries=0).memory("ana")
    assert len(script.requests) == 1 and time.slept == []


def test_no_wait_goes_past_the_deadline() -> None:
    script, time = Script([error(429, "rate_limited", retry_after="25")]), FakeTime()
    with pytest.raises(RateLimited):
        client(script, time, retries=10, deadline=60).memory("ana")
    # 25 s, 50 s; a third wait would end at 75 s, past the 60 s deadline.
    assert time.slept == [25.0, 25.0] and len(script.requests) == 3
    script, time = Script([error(429, "rate_limited", retry_after="3600")]), FakeTime()
    with pytest.raises(RateLimited) as raised:
        client(script, time).memory("ana")
    assert time.slept == [] and len(script.requests) == 1 and raised.value.retry_after == 3600


def test_time_spent_in_attempts_counts_toward_the_deadline() -> None:
    time = FakeTime()

    def slow_busy(request: httpx.Request) -> httpx.Response:
        time.now += 50  # the attempt itself took 50 s
        return error(503, "unavailable", retry_after="15")

    script = Script([slow_busy])
    with pytest.raises(Unavailable):
        client(script, time, deadline=60).memory("ana")
    assert time.slept == [] and len(script.requests) == 1


def test_a_post_without_a_key_gets_one_per_call_the_same_on_every_attempt() -> None:
    script = Script([error(503, "unavailable"), error(429, "rate_limited", retry_after="1"), ok()])
    degrau = client(script, FakeTime())
    degrau.send_message("ana", "hello")
    first = script.keys()
    assert len(first) == 3 and first[0] is not None and len(set(first)) == 1
    assert uuid.UUID(first[0]).version == 4
    script.requests.clear()
    degrau.commit_round("ana", "h1", ROUND, USAGE)
    assert len(set(script.keys())) == 1 and script.keys()[0] not in (None, first[0])


def test_a_post_with_the_callers_key_keeps_it() -> None:
    script = Script([error(429, "rate_limited", retry_after="1"), ok()])
    client(script, FakeTime()).commit_round("ana", "h1", ROUND, USAGE, idempotency_key="ana-turn-7")
    assert script.keys() == ["ana-turn-7", "ana-turn-7"]


def test_without_retries_a_post_goes_as_the_caller_wrote_it() -> None:
    script = Script([ok()])
    client(script, FakeTime(), retries=0).send_message("ana", "hello")
    assert script.keys() == [None]


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request"),
        (401, "unauthenticated"),
        (404, "not_found"),
        (409, "conflict"),
        (413, "too_large"),
        (422, "idempotency_mismatch"),
        (500, "tenant_config_invalid"),
        (502, "model_error"),
        (502, "model_refused"),
    ],
)
def test_other_errors_are_not_retried(status: int, kind: str) -> None:
    script, time = Script([error(status, kind, retry_after="1"), ok()]), FakeTime()
    with pytest.raises(Exception) as raised:
        client(script, time).send_message("ana", "hello")
    assert getattr(raised.value, "type", None) == kind and getattr(raised.value, "status", None) == status
    assert len(script.requests) == 1 and time.slept == []


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ConnectError("refused"),
        httpx.ConnectTimeout("connect timed out"),
        httpx.ReadTimeout("read timed out"),
        httpx.RemoteProtocolError("server disconnected"),
    ],
)
def test_connection_failures_and_timeouts_are_retried_keys_and_all(failure: Exception) -> None:
    script, time = Script([failure, ok({"recorded": True})]), FakeTime()
    assert client(script, time).commit_round("ana", "h1", ROUND, USAGE) == {"recorded": True}
    keys = script.keys()
    assert len(keys) == 2 and keys[0] is not None and keys[0] == keys[1] and len(time.slept) == 1


def test_connection_failures_past_the_bound_raise_typed_errors_and_others_are_not_retried() -> None:
    script, time = Script([httpx.ConnectError("refused")]), FakeTime()
    with pytest.raises(APIConnectionError) as raised:
        client(script, time, retries=2).memory("ana")
    assert len(script.requests) == 3 and not isinstance(raised.value, APITimeoutError)
    assert isinstance(raised.value.__cause__, httpx.ConnectError) and raised.value.request_id is None
    script, time = Script([httpx.ReadTimeout("slow")]), FakeTime()
    with pytest.raises(APITimeoutError) as timed_out:
        client(script, time, retries=1).memory("ana")
    assert isinstance(timed_out.value, APIConnectionError) and isinstance(timed_out.value, DegrauError)
    script, time = Script([httpx.UnsupportedProtocol("gopher"), ok()]), FakeTime()
    with pytest.raises(APIConnectionError):
        client(script, time).memory("ana")
    assert len(script.requests) == 1 and time.slept == []


def test_a_round_sends_the_usage_split_once_and_refusals_are_raised_as_they_are() -> None:
    script = Script([ok({"recorded": True})])
    assert client(script, FakeTime()).commit_round("ana", "h1", ROUND, FULL_USAGE) == {"recorded": True}
    (sent,) = script.bodies()
    assert sent["usage"] == SENT_USAGE
    script = Script([error(400, "invalid_request", "messages.1: a round ends with the answer"), ok()])
    with pytest.raises(InvalidRequest):
        client(script, FakeTime()).commit_round("ana", "h1", ROUND, FULL_USAGE)
    assert len(script.requests) == 1


def test_retry_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        DegrauClient("http://degrau.test", retries=-1)
    with pytest.raises(ValueError):
        DegrauClient("http://degrau.test", deadline=-1)

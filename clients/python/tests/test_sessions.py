"""search_sessions (recall over a contact's earlier sessions): what it sends and
reads offline, and a bad query refused as the API documents it."""

from __future__ import annotations

import pytest

from degrau_client import DegrauClient, InvalidRequest
from scripted import Script, error, ok

RECORDS = {
    "sessions": [
        {
            "session": 2,
            "excerpt": "customer: Can I book a haircut with Rafa?",
            "ids": ["BK-9F3A21C7", "2026-03-13"],
            "messages": 6,
            "ended_at": 1773360000,
            "score": 2.71,
        }
    ]
}


def test_search_sessions_sends_the_query_and_the_limit_and_returns_the_records() -> None:
    script = Script([ok(RECORDS), ok({"sessions": []})])
    client = DegrauClient("http://degrau.test", tenant="acme", transport=script.transport())
    found = client.search_sessions("a b", "corte com o Bruno", limit=3)
    assert found["sessions"][0]["ids"][0] == "BK-9F3A21C7"
    assert client.search_sessions("ana") == {"sessions": []}
    first, second = script.requests
    assert first.method == "GET"
    assert first.url.raw_path.decode() == "/v1/contacts/a%20b/sessions?q=corte+com+o+Bruno&limit=3"
    assert second.url.raw_path.decode() == "/v1/contacts/ana/sessions"


def test_a_bad_query_is_an_invalid_request() -> None:
    message = "`limit` must be a whole number from 1 to 20"
    script = Script([error(400, "invalid_request", message)])
    client = DegrauClient("http://degrau.test", retries=0, transport=script.transport())
    with pytest.raises(InvalidRequest, match="from 1 to 20"):
        client.search_sessions("ana", limit=21)

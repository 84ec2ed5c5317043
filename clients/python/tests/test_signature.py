"""``verify_signature`` against the signatures degrau's webhook signing really
makes (``clients/fixtures/webhook-signatures.json``: the adapters' test signs each
case and compares), and against what must fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from degrau_client import SignatureError, verify_signature

FIXTURES = json.loads(
    (Path(__file__).resolve().parents[2] / "fixtures" / "webhook-signatures.json").read_text(encoding="utf-8")
)["cases"]


@pytest.mark.parametrize("case", FIXTURES, ids=[c["name"] for c in FIXTURES])
def test_degraus_signatures_verify_over_the_raw_body(case: dict[str, Any]) -> None:
    secret, header, body, t = str(case["secret"]), str(case["header"]), str(case["body"]), int(case["timestamp"])
    assert verify_signature(secret, header, body.encode(), now=t + 10) == t
    assert verify_signature(secret.encode(), header, body, now=t - 10) == t
    # Rotating: the old secret among others.
    assert verify_signature(["whsec_new", secret], header, body.encode(), now=t) == t


@pytest.mark.parametrize("case", FIXTURES, ids=[c["name"] for c in FIXTURES])
def test_a_tampered_body_another_secret_or_an_old_timestamp_is_refused(case: dict[str, Any]) -> None:
    secret, header, body, t = str(case["secret"]), str(case["header"]), str(case["body"]), int(case["timestamp"])
    with pytest.raises(SignatureError, match="no signature matches"):
        verify_signature(secret, header, body.encode() + b" ", now=t)
    with pytest.raises(SignatureError, match="no signature matches"):
        verify_signature(secret + "x", header, body.encode(), now=t)
    with pytest.raises(SignatureError, match="from now"):
        verify_signature(secret, header, body.encode(), now=t + 301)
    assert verify_signature(secret, header, body.encode(), now=t + 3600, tolerance=3600) == t
    # A re-encoded JSON body is not the raw body.
    if body:
        with pytest.raises(SignatureError):
            verify_signature(secret, header, json.dumps(json.loads(body)).encode() + b"\n", now=t)


def test_a_missing_or_malformed_header_is_refused() -> None:
    for header in (None, "", "v1=abc", "t=1700000000", "t=soon,v1=abc"):
        with pytest.raises(SignatureError):
            verify_signature("s", header, b"", now=1_700_000_000)

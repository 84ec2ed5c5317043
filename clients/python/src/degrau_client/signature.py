"""Verifying degrau's webhook-tool calls, for a tenant's receiver.

degrau signs every call of a webhook tool (docs/webhook-tools.md) with
``Degrau-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">``
under the tool's signing secret (Stripe's scheme; each attempt signed afresh).
:func:`verify_signature` checks it over the raw bytes received, in constant time,
and refuses a ``t`` too far from now (a replayed call); standard library only::

    from degrau_client import SignatureError, verify_signature

    try:
        verify_signature(SECRET, request.headers["Degrau-Signature"], raw_body)
    except SignatureError as refused:
        return 401, str(refused)

While a secret is rotated (a warm ``ask`` keeps the old one up to five minutes)
pass both: any of them verifies. A receiver also refuses a call whose ``tenant``
is not the one it serves, and answers a repeated ``Idempotency-Key`` with its
first answer (a retried round may call again).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable

#: The header degrau signs a call in.
SIGNATURE_HEADER = "Degrau-Signature"
#: How far ``t`` may be from now, in seconds, by default.
DEFAULT_TOLERANCE_SECONDS = 300


class SignatureError(ValueError):
    """The call is not signed by degrau with the secret given (or its signature is
    too old); the message says which."""


def _key(secret: str | bytes) -> bytes:
    return secret.encode() if isinstance(secret, str) else secret


def verify_signature(
    secret: str | bytes | Iterable[str | bytes],
    header: str | None,
    body: bytes | str,
    *,
    tolerance: float = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> int:
    """Checks a call's ``Degrau-Signature`` ``header`` over its raw ``body`` (the
    bytes received, not a re-encoded JSON; text is taken as UTF-8) under
    ``secret`` (or any of several, while rotating). Answers the call's timestamp;
    raises :class:`SignatureError` when there is no valid ``t`` or ``v1``, when
    ``t`` is more than ``tolerance`` seconds from ``now`` (default: the clock), or
    when no ``v1`` matches."""
    if not header:
        raise SignatureError(f"no {SIGNATURE_HEADER} header")
    timestamp: int | None = None
    signatures: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1" and value:
            signatures.append(value)
    if timestamp is None:
        raise SignatureError("the signature has no timestamp (t=)")
    if not signatures:
        raise SignatureError("the signature has no v1=")
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        raise SignatureError(f"the timestamp is more than {tolerance:g} s from now: a replayed or delayed call")
    raw = body.encode() if isinstance(body, str) else body
    secrets = [secret] if isinstance(secret, (str, bytes)) else list(secret)
    if not secrets:
        raise SignatureError("no secret to verify with")
    signed = f"{timestamp}.".encode() + raw
    for key in secrets:
        expected = hmac.new(_key(key), signed, hashlib.sha256).hexdigest()
        if any(hmac.compare_digest(expected, given) for given in signatures):
            return timestamp
    raise SignatureError("no signature matches the body under the secret")

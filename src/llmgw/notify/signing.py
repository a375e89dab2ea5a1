"""The `X-Llmgw-Signature` header: HMAC-SHA256 over `"<timestamp>.<body>"` under the
webhook's secret, sent as `t=<unix seconds>,v1=<hex>` (Stripe's scheme).

Signing the timestamp with the body lets a receiver refuse a captured request replayed
later: it recomputes the HMAC over the timestamp it was given and the raw body, compares
in constant time, and refuses a timestamp further than its tolerance from its own clock
(`verify`, whose 5 minutes is Stripe's default). A retried delivery is signed anew with
the time it is sent, so a retry an hour later still verifies.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Llmgw-Signature"
TOLERANCE_S = 300.0
"""How far a receiver should accept a timestamp from its own clock."""


def _digest(secret: bytes, timestamp: int, body: bytes) -> str:
    return hmac.new(secret, str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def sign(secret: bytes, body: bytes, timestamp: int) -> str:
    """The header's value for `body` sent at `timestamp` (UNIX seconds)."""
    return f"t={timestamp},v1={_digest(secret, timestamp, body)}"


def verify(secret: bytes, body: bytes, header: str, now: float, tolerance_s: float = TOLERANCE_S) -> bool:
    """Whether `header` signs `body` under `secret`, at a time within `tolerance_s` of
    `now`. Any `v1` given may match (a sender rolling its secret sends two)."""
    timestamp: int | None = None
    signatures: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1":
            signatures.append(value)
    if timestamp is None or not signatures or abs(now - timestamp) > tolerance_s:
        return False
    expected = _digest(secret, timestamp, body)
    return any(hmac.compare_digest(expected, given) for given in signatures)

"""The `X-Llmgw-Signature` header: what a receiver computes to trust a delivery, and the
requests it must refuse (another secret, a changed body, an old or future timestamp)."""

from __future__ import annotations

import hashlib
import hmac

from llmgw.notify.signing import TOLERANCE_S, sign, verify

SECRET = b"whsec-test"
BODY = b'{"id":"evt_1","type":"node.lost","time":1700000000.0,"data":{"node":"n1"}}'
SENT_AT = 1_700_000_000


def test_the_header_is_stripe_shaped_hmac_over_timestamp_dot_body() -> None:
    expected = hmac.new(SECRET, f"{SENT_AT}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign(SECRET, BODY, SENT_AT) == f"t={SENT_AT},v1={expected}"


def test_a_receiver_with_the_secret_verifies_it() -> None:
    assert verify(SECRET, BODY, sign(SECRET, BODY, SENT_AT), now=SENT_AT + 2)


def test_another_secret_or_a_changed_body_fails() -> None:
    header = sign(SECRET, BODY, SENT_AT)
    assert not verify(b"other", BODY, header, now=SENT_AT)
    assert not verify(SECRET, BODY.replace(b"n1", b"n2"), header, now=SENT_AT)


def test_a_timestamp_outside_the_tolerance_is_refused_as_a_replay() -> None:
    header = sign(SECRET, BODY, SENT_AT)
    assert verify(SECRET, BODY, header, now=SENT_AT + TOLERANCE_S)
    assert not verify(SECRET, BODY, header, now=SENT_AT + TOLERANCE_S + 1)
    assert not verify(SECRET, BODY, header, now=SENT_AT - TOLERANCE_S - 1)


def test_a_timestamp_changed_in_transit_breaks_the_signature() -> None:
    digest = sign(SECRET, BODY, SENT_AT).split("v1=")[1]
    assert not verify(SECRET, BODY, f"t={SENT_AT + 60},v1={digest}", now=SENT_AT + 60)


def test_malformed_headers_are_refused() -> None:
    for header in ("", "t=abc,v1=00", f"t={SENT_AT}", "v1=00", "sha256=00"):
        assert not verify(SECRET, BODY, header, now=SENT_AT), header


def test_any_of_several_signatures_may_match() -> None:
    good = sign(SECRET, BODY, SENT_AT).split("v1=")[1]
    assert verify(SECRET, BODY, f"t={SENT_AT},v1={'0' * 64},v1={good}", now=SENT_AT)

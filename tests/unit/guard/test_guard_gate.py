"""The one-pass gate (llmgw.guard.gate) skips only detectors that cannot match: the
gated scan finds exactly what every detector run on its own finds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgw.guard.detectors import PII, SECRETS, find, regex_detectors
from llmgw.guard.gate import Gate, gate_for, portable
from llmgw.guard.inspect_text import findings_for
from llmgw.guard.policy import Rule

OPERATOR = regex_detectors((r"(?i)project zeus", r"\bconfidential\b", r"ACME-\d{4}", r"end$", r"(?<=x)y"))
RULES = (
    Rule("p", "pii", "redact", PII),
    Rule("p", "secrets", "redact", SECRETS),
    Rule("p", "regex", "redact", OPERATOR),
)


def each_alone(text: str) -> list[tuple[str, list[tuple[str, int, int]]]]:
    out = []
    for rule in RULES:
        found = find(rule.check, rule.detectors, text)
        if found:
            out.append((rule.check, [(f.label, f.start, f.end) for f in found]))
    return out


def gated(text: str) -> list[tuple[str, list[tuple[str, int, int]]]]:
    return [(r.check, [(f.label, f.start, f.end) for f in fs]) for r, fs in findings_for(text, RULES)]


SAMPLES = [
    "write to john.doe+x@mail.example.co.uk today",
    "card 4111 1111 1111 1111 exp and 378282246310005",
    "iban GB82 WEST 1234 5698 7654 32 ok, DE89370400440532013000",
    "ssn 123-45-6789, tc 10000000146, call +44 20 7946 0958 or (415) 555-2671",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
    "aws AKIAIOSFODNN7EXAMPLE gh ghp_" + "a" * 36 + " sk-proj-" + "b" * 24,
    "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123",
    "https://user:hunter2@example.com/x eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig",
    "sk_live_" + "c" * 20 + " hf_" + "d" * 34,
    "PROJECT Zeus is confidential, ACME-1234, the end",
    "the end\n",  # `end$` before a final newline: Python matches, RE2 would not
    "xy",  # a lookbehind: RE2 cannot compile it
    # Non-ASCII text: the operator's patterns are not gated there.
    "café john@example.com 4111 1111 1111 1111 confidential ACME-0001 Project ZEUS",
    "confidentialé",
    "a lone surrogate \ud800 4111 1111 1111 1111",
    "prose with nothing at all in it, only words and 12 numbers",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_gate_finds_what_each_detector_finds(text: str) -> None:
    assert gated(text) == each_alone(text)


def test_samples_are_not_all_empty() -> None:
    # The comparison above means something only if the detectors find things.
    assert sum(1 for t in SAMPLES if each_alone(t)) >= 12


def test_text_with_nothing_skips_every_detector() -> None:
    gate = Gate([PII, SECRETS])
    assert gate.live("plain prose about the gateway, 2026 and 12 nodes") == [(), ()]
    assert gate.live("mail a@example.com") == [tuple(d for d in PII if d.label == "EMAIL"), ()]


def test_unsure_operator_patterns_always_run() -> None:
    assert portable(r"\bconfidential\b")
    for p in (r"end$", r"a\sb", r"a{,3}", r"[[:alpha:]]", r"(a)\1", "café"):
        assert not portable(p)
    unsure = regex_detectors((r"a\sb",))
    assert Gate([unsure]).live("nothing here") == [unsure]


_ALPHABET = "aekAKIS-_@.:/+ ()0123456789xyzé\n\v"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=80))
def test_gate_never_loses_a_finding(text: str) -> None:
    assert gated(text) == each_alone(text)


@pytest.mark.parametrize(
    "text",
    ["4" * 32768, "a@a." * 8192, ("sk-" + "a" * 19 + " ") * 1400, "+1 1 " * 6000, "://a:" * 6000],
)
def test_adversarial_inputs_finish_through_the_gate(text: str) -> None:
    assert gated(text) == each_alone(text)


def test_the_gate_is_compiled_once_per_policy_not_per_request() -> None:
    # The request path rebuilds the tuple of rules each time; the detector tuples stay.
    first = gate_for([PII, SECRETS, OPERATOR])
    assert gate_for([PII, SECRETS, OPERATOR]) is first
    assert gate_for([PII, SECRETS, regex_detectors((r"(?i)project zeus",))]) is not first

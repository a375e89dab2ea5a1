"""What pii, secrets and regex checks find, what they leave alone, and that no pattern
backtracks catastrophically on adversarial text."""

from __future__ import annotations

import pytest

from llmgw.guard.detectors import PII, SECRETS, find, regex_detectors
from llmgw.guard.digits import iban_valid, luhn_valid, ssn_valid, tckn_valid


def labels(detectors: object, text: str) -> list[str]:
    return [f.label for f in find("x", detectors, text)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("write to john.doe+x@mail.example.co.uk today", "EMAIL"),
        ("card 4111 1111 1111 1111 exp", "CARD"),
        ("card 4111-1111-1111-1111", "CARD"),
        ("card 378282246310005", "CARD"),
        ("iban GB82 WEST 1234 5698 7654 32 ok", "IBAN"),
        ("iban DE89370400440532013000", "IBAN"),
        ("ssn 123-45-6789", "SSN"),
        ("tc 10000000146", "NATIONAL_ID"),
        ("call +1 415 555 2671", "PHONE"),
        ("call +44 20 7946 0958", "PHONE"),
        ("call (415) 555-2671", "PHONE"),
    ],
)
def test_pii_finds(text: str, label: str) -> None:
    assert labels(PII, text) == [label]


@pytest.mark.parametrize(
    "text",
    [
        "order 4111 1111 1111 1112 shipped",  # fails Luhn
        "iban GB83 WEST 1234 5698 7654 32",  # fails mod 97
        "ssn 000-12-3456 is not issued",
        "id 10000000147",  # wrong check digit
        "in 2026 we had 12 teams and 4 regions",
        "user@localhost is not an address with a domain",
        "version 1.2.3-rc4",
    ],
)
def test_pii_leaves_alone(text: str) -> None:
    assert labels(PII, text) == []


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "PRIVATE_KEY"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "PRIVATE_KEY"),
        ("aws AKIAIOSFODNN7EXAMPLE", "AWS_KEY"),
        ("gh ghp_" + "a" * 36, "GITHUB_TOKEN"),
        ("gl glpat-" + "x" * 20, "GITLAB_TOKEN"),
        ("slack xoxb-1234567890-abcdef", "SLACK_TOKEN"),
        ("g AIza" + "b" * 35, "GOOGLE_KEY"),
        ("stripe sk_live_" + "c" * 24, "STRIPE_KEY"),
        ("openai sk-proj-" + "d" * 40, "API_KEY"),
        ("anthropic sk-ant-api03-" + "e" * 40, "API_KEY"),
        ("hf hf_" + "f" * 34, "HF_TOKEN"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig_nature", "JWT"),
        ("Authorization: Bearer abcdefghijklmnop1234", "BEARER_TOKEN"),
        ("postgres://admin:hunter2@db:5432/x", "URL_PASSWORD"),
    ],
)
def test_secrets_find(text: str, label: str) -> None:
    assert labels(SECRETS, text) == [label]


def test_secrets_leave_alone_words_that_start_like_keys() -> None:
    assert labels(SECRETS, "ask-me-anything risk-free task_test_x https://example.com/a@b") == []
    assert labels(SECRETS, "xAKIAIOSFODNN7EXAMPLE") == []


def test_regex_patterns_and_leading_word_boundary() -> None:
    found = regex_detectors((r"\bzeus\b", r"ACME-\d{4}"))
    assert labels(found, "zeus and ACME-1234") == ["REDACTED", "REDACTED"]
    assert labels(found, "prozeus") == []


def test_check_digits() -> None:
    assert luhn_valid("4111111111111111")
    assert not luhn_valid("4111111111111112")
    assert iban_valid("GB82WEST12345698765432")
    assert not iban_valid("GB82WEST12345698765433")
    assert tckn_valid("10000000146")
    assert not tckn_valid("00000000146")
    assert ssn_valid("123-45-6789")
    assert not ssn_valid("666-45-6789")
    assert not ssn_valid("900-45-6789")


@pytest.mark.parametrize(
    "text",
    [
        "4" * 32768,
        "a@a." * 8192,
        ("sk-" + "a" * 19 + " ") * 1400,
        "+1 1 " * 6000,
        "-----BEGIN PRIVATE KEY-----" + "A" * 32768,
        "eyJ" + "a" * 32768,
        "1 " * 16000,
        "Bearer " * 4000,
        "://a:" * 6000,
    ],
)
def test_adversarial_inputs_finish(text: str) -> None:
    # A pattern with catastrophic backtracking would not return on these for hours.
    find("pii", PII, text)
    find("secrets", SECRETS, text)

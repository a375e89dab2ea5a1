"""Durations with days: read where a caller asks for them (the command line's `--since`
and `--ttl`), refused with the fix in the settings' grammar, and passed on to the admin
API in that grammar."""

from __future__ import annotations

from datetime import timedelta

import pytest

from llmgw.cli.values import duration
from llmgw.core.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7d", timedelta(days=7)),
        ("1d12h", timedelta(days=1, hours=12)),
        ("0.5d", timedelta(hours=12)),
        ("30m", timedelta(minutes=30)),
        ("-1d", timedelta(days=-1)),
    ],
)
def test_days_are_read_when_asked_for(text: str, expected: timedelta) -> None:
    assert parse_duration(text, days=True) == expected


def test_the_settings_grammar_refuses_days_and_says_how_to_write_them() -> None:
    with pytest.raises(ValueError, match=r"'7d': days are not taken here; write them as hours, like 168h"):
        parse_duration("7d")
    assert parse_duration("168h") == timedelta(days=7)


@pytest.mark.parametrize("text", ["7", "7x", "d", "", "1d2", "week"])
def test_what_is_not_a_duration_is_refused_with_the_form_including_days(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration: write it like 30m, 24h, 7d or 1d12h"):
        parse_duration(text, days=True)


@pytest.mark.parametrize(
    ("typed", "sent"),
    [("7d", "168h"), ("30d", "720h"), ("1d30m", "24h30m"), ("24h", "24h"), ("90s", "1m30s")],
)
def test_the_command_line_sends_what_the_admin_api_reads(typed: str, sent: str) -> None:
    assert duration(typed, "--since") == sent
    assert parse_duration(sent) == parse_duration(typed, days=True)
    assert format_duration(parse_duration(sent)) == sent


def test_a_bad_duration_on_the_command_line_names_its_option() -> None:
    with pytest.raises(ValueError, match=r"^--since '7x' is not a duration") as refused:
        duration("7x", "--since")
    assert str(refused.value) == "--since '7x' is not a duration: write it like 30m, 24h, 7d or 1d12h"

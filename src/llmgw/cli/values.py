"""Values typed on the command line, checked here and passed on in the admin API's form.

Durations: the command line takes days (`--since 7d`, `--ttl 30d`, as docs/auth.md
writes them); the admin API reads the settings' grammar, which has none. So a duration
is parsed here, with days, and sent as the settings write it (`7d` goes as `168h`): a
typo is caught before any call, as one sentence naming the option.
"""

from __future__ import annotations

from llmgw.core.durations import format_duration, parse_duration


def duration(text: str, option: str) -> str:
    """`text` (days allowed) as the admin API reads it; ValueError naming `option` if it
    is not a duration."""
    try:
        return format_duration(parse_duration(text, days=True))
    except ValueError as exc:
        raise ValueError(f"{option} {exc}") from None

"""Request tags: the `metadata` object of a request body and the `x-llmgw-tags` header
(`team=search, run=nightly`), as one small string map for the usage record.

Clients choose tags freely, so both their number and their length are capped here:
a request cannot grow its own usage record without bound.
"""

from __future__ import annotations

from collections.abc import Mapping

MAX_TAGS = 16
MAX_NAME_CHARS = 64
MAX_VALUE_CHARS = 128


def parse_tags(header: str | None, metadata: Mapping[str, object] | None = None) -> dict[str, str]:
    """Tags from the body's `metadata` (string values only), then the header's, which
    win on a clash; at most `MAX_TAGS`, names and values cut to their caps."""
    tags: dict[str, str] = {}
    if metadata:
        for name, value in metadata.items():
            if isinstance(name, str) and isinstance(value, str | int | float | bool) and name:
                tags[name[:MAX_NAME_CHARS]] = str(value)[:MAX_VALUE_CHARS]
    if header:
        for part in header.split(","):
            name, sep, value = part.partition("=")
            name = name.strip()
            if sep and name:
                tags[name[:MAX_NAME_CHARS]] = value.strip()[:MAX_VALUE_CHARS]
    if len(tags) > MAX_TAGS:
        tags = dict(list(tags.items())[:MAX_TAGS])
    return tags

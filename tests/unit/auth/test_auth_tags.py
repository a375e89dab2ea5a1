"""Request tags from metadata and the x-llmgw-tags header."""

from __future__ import annotations

from llmgw.auth.tags import MAX_TAGS, parse_tags


def test_header_and_metadata_merge_with_the_header_winning() -> None:
    tags = parse_tags(
        "team = search, run=nightly,broken", {"team": "ads", "user": "u1", "n": 3, "x": {"a": 1}}
    )
    assert tags == {"team": "search", "user": "u1", "n": "3", "run": "nightly"}


def test_tags_are_capped() -> None:
    header = ",".join(f"t{i}={'v' * 500}" for i in range(40))
    tags = parse_tags(header)
    assert len(tags) == MAX_TAGS
    assert all(len(value) == 128 for value in tags.values())
    assert parse_tags(None) == {}

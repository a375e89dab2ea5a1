"""Which requests the response cache may answer, and their keys: the body's canonical
form, apart from the fields that do not change an answer."""

from __future__ import annotations

from typing import Any

import pytest

from llmgw.router.cache_key import cache_key, cacheable

CHAT = b"/v1/chat/completions"
BODY: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "user", "content": "hi"}],
    "temperature": 0,
    "max_tokens": 8,
}


def _key(body: dict[str, Any], project: str = "p", stream: bool = False, usage: bool = False) -> bytes:
    return cache_key(project, CHAT, "m", stream, usage, body)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"temperature": 0}, True),
        ({"temperature": 0.0}, True),
        ({"temperature": 0.7, "seed": 7}, True),
        ({"seed": 0}, True),
        ({"temperature": 0.7}, False),
        ({}, False),  # the default temperature samples
        ({"temperature": False}, False),
        ({"seed": True}, False),
        ({"seed": "7"}, False),
    ],
)
def test_only_repeatable_requests_are_cacheable(fields: dict[str, Any], expected: bool) -> None:
    assert cacheable({"messages": [], **fields}) is expected


def test_key_order_and_fields_that_change_no_answer_do_not_matter() -> None:
    reordered = dict(reversed(list(BODY.items())))
    decorated = {
        **BODY,
        "user": "someone",
        "metadata": {"run": "x"},
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert _key(reordered) == _key(BODY) == _key(decorated)


@pytest.mark.parametrize(
    "change",
    [
        {"messages": [{"role": "user", "content": "hello"}]},
        {"max_tokens": 9},
        {"seed": 1},
        {"top_p": 0.5},
        {"stop": ["\n"]},
        {"n": 2},
        {"tools": [{"type": "function", "function": {"name": "f"}}]},
        {"response_format": {"type": "json_object"}},
        {"logit_bias": {"50256": -100}},  # a field not named anywhere still counts
    ],
)
def test_a_field_that_changes_the_answer_changes_the_key(change: dict[str, Any]) -> None:
    assert _key({**BODY, **change}) != _key(BODY)


def test_project_model_route_and_shape_are_part_of_the_key() -> None:
    base = _key(BODY)
    assert _key(BODY, project="q") != base
    assert cache_key("p", CHAT, "other", False, False, BODY) != base
    assert cache_key("p", b"/v1/completions", "m", False, False, BODY) != base
    assert _key(BODY, stream=True) != base
    assert _key(BODY, stream=True, usage=True) != _key(BODY, stream=True)

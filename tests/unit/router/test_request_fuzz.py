"""Fuzzing what the gateway reads of a request: chat, completions and embeddings bodies
with any JSON value at every position the gateway reads, and around it, must give a
parsed request or a 400 in OpenAI's shape, never another exception (which the server
would answer with a 500 and a traceback in its log)."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgw.errors import BadRequest
from llmgw.router.request import ClientRequest, Kind, parse_request

# orjson's own range: integers beyond 64 bits are not JSON it writes or reads.
_INTS = st.integers(min_value=-(2**63), max_value=2**64 - 1)
_SCALARS = (
    st.none() | st.booleans() | _INTS | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
)
ANY_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _or_any(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The plausible value most of the time, any JSON value otherwise."""
    return st.one_of(strategy, strategy, ANY_JSON)


_PART_TYPES = st.sampled_from(["text", "refusal", "image_url", "input_audio", "file"])
PART = st.fixed_dictionaries(
    {"type": _or_any(_PART_TYPES)},
    optional={
        "text": _or_any(st.text(max_size=8)),
        "refusal": _or_any(st.text(max_size=8)),
        "image_url": ANY_JSON,
    },
)
TOOL_CALL = st.fixed_dictionaries(
    {
        "id": _or_any(st.text(max_size=4)),
        "type": _or_any(st.just("function")),
        "function": _or_any(
            st.fixed_dictionaries(
                {"name": _or_any(st.text(max_size=6)), "arguments": _or_any(st.just("{}"))},
            )
        ),
    }
)
MESSAGE = st.fixed_dictionaries(
    {"role": _or_any(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))},
    optional={
        "content": _or_any(st.text(max_size=8) | st.lists(_or_any(PART), max_size=4)),
        "tool_calls": _or_any(st.lists(_or_any(TOOL_CALL), max_size=3)),
        "name": ANY_JSON,
    },
)
_COMMON = {
    "stream": _or_any(st.booleans()),
    "stream_options": _or_any(st.fixed_dictionaries({}, optional={"include_usage": ANY_JSON})),
    "max_tokens": _or_any(st.integers(min_value=1, max_value=4096)),
    "max_completion_tokens": _or_any(st.integers(min_value=1, max_value=4096)),
    "metadata": ANY_JSON,
    "priority": ANY_JSON,
    "lora": ANY_JSON,
    "extra": ANY_JSON,
}
_TEXT_OR_TOKENS = _or_any(
    st.text(max_size=8)
    | st.lists(_or_any(st.text(max_size=4)), max_size=4)
    | st.lists(_or_any(_INTS), max_size=4)
    | st.lists(_or_any(st.lists(_or_any(_INTS), max_size=3)), max_size=3)
)
_MODEL = {"model": _or_any(st.text(min_size=1, max_size=6))}
BODIES: dict[Kind, st.SearchStrategy[Any]] = {
    Kind.CHAT: st.fixed_dictionaries(
        _MODEL, optional={"messages": _or_any(st.lists(_or_any(MESSAGE), max_size=4)), **_COMMON}
    ),
    Kind.COMPLETIONS: st.fixed_dictionaries(_MODEL, optional={"prompt": _TEXT_OR_TOKENS, **_COMMON}),
    Kind.EMBEDDINGS: st.fixed_dictionaries(_MODEL, optional={"input": _TEXT_OR_TOKENS, **_COMMON}),
}


def _positions(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every position in a JSON document: the path of keys and indexes to it."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_positions(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_positions(item, (*path, index)))
    return found


def _replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    copy = dict(document) if isinstance(document, dict) else list(document)
    copy[head] = _replaced(document[head], rest, value)
    return copy


def _parsed_or_refused(kind: Kind, raw: bytes) -> ClientRequest | None:
    """The parsed request, or None after checking the refusal is a well-formed 400."""
    refused: BadRequest | None = None
    try:
        request = parse_request(kind, raw)
    except BadRequest as exc:
        refused = exc
    if refused is not None:
        assert refused.status == 400
        assert refused.error_type == "invalid_request_error"
        assert refused.message
        return None
    # What the rest of the request path reads of a parsed request must hold up too.
    assert isinstance(request.prompt, str)
    assert request.prompt_token_floor >= 0
    request.body_for("renamed", ask_usage=True, priority=3, lora=1)
    return request


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(list(Kind)).flatmap(lambda kind: st.tuples(st.just(kind), BODIES[kind])))
def test_any_value_at_any_position_parses_or_is_a_400(case: tuple[Kind, Any]) -> None:
    kind, body = case
    _parsed_or_refused(kind, orjson.dumps(body))


# A well-formed body of each kind touching every field the gateway reads; the test below
# puts any JSON value at one of its positions, which finds a wrong type far more often
# than drawing every field at random does.
VALID: dict[Kind, list[dict[str, Any]]] = {
    Kind.CHAT: [
        {
            "model": "m",
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": 8,
            "max_completion_tokens": 8,
            "metadata": {"team": "a"},
            "messages": [
                {"role": "system", "content": "be brief"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": "data:,"}},
                        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}},
                        {"type": "file", "file": {"file_id": "f"}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "ok"}, {"type": "refusal", "refusal": "no"}],
                    "tool_calls": [
                        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
                {"role": "tool", "content": "done", "tool_call_id": "c"},
            ],
        }
    ],
    Kind.COMPLETIONS: [
        {"model": "m", "prompt": "once", "max_tokens": 8, "stream": False},
        {"model": "m", "prompt": ["a", "b"]},
        {"model": "m", "prompt": [1, 2]},
        {"model": "m", "prompt": [[1, 2], [3]]},
    ],
    Kind.EMBEDDINGS: [
        {"model": "m", "input": "text"},
        {"model": "m", "input": ["a", "b"]},
        {"model": "m", "input": [[1], [2, 3]]},
    ],
}


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_any_value_at_one_position_of_a_valid_body_parses_or_is_a_400(data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(list(Kind)))
    body = data.draw(st.sampled_from(VALID[kind]))
    path = data.draw(st.sampled_from(_positions(body)))
    _parsed_or_refused(kind, orjson.dumps(_replaced(body, path, data.draw(ANY_JSON))))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(list(Kind)), ANY_JSON)
def test_any_json_document_parses_or_is_a_400(kind: Kind, body: Any) -> None:
    _parsed_or_refused(kind, orjson.dumps(body))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(list(Kind)), st.binary(max_size=64))
def test_any_bytes_parse_or_are_a_400(kind: Kind, raw: bytes) -> None:
    _parsed_or_refused(kind, raw)

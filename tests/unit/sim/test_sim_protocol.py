"""Request parsing: what is read, and how each bad field is refused."""

from __future__ import annotations

import orjson
import pytest

from llmgw.sim.protocol import ApiError, parse_chat, parse_completion, parse_embedding

SERVED = ("m", "alias")


def body(**fields: object) -> bytes:
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields})


def test_a_chat_request_is_read() -> None:
    parsed = parse_chat(
        body(stream=True, stream_options={"include_usage": True}, max_tokens=5, stop="x", seed=3), SERVED
    )
    s = parsed.sampling
    assert (s.model, s.stream, s.include_usage, s.max_tokens, s.stop, s.seed) == (
        "m",
        True,
        True,
        5,
        ("x",),
        3,
    )


def test_max_completion_tokens_stands_for_max_tokens_in_chat() -> None:
    assert parse_chat(body(max_completion_tokens=7), SERVED).sampling.max_tokens == 7


def test_a_missing_model_is_the_first_served_one() -> None:
    raw = orjson.dumps({"messages": [{"role": "user", "content": "hi"}]})
    assert parse_chat(raw, SERVED).sampling.model == "m"


def test_an_unknown_model_is_404_in_openai_shape() -> None:
    with pytest.raises(ApiError) as caught:
        parse_chat(body(model="nope"), SERVED)
    assert caught.value.status == 404
    error = orjson.loads(caught.value.body())["error"]
    assert error == {"message": "The model `nope` does not exist.", "type": "NotFoundError", "param": "model",
                     "code": 404}  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"n": 2}, "n"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": "5"}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"stop": 5}, "stop"),
        ({"stream": "yes"}, "stream"),
        ({"stream_options": {"include_usage": True}}, "stream_options"),
        ({"messages": []}, "messages"),
        ({"model": 5}, "model"),
    ],
)
def test_bad_fields_are_400_naming_the_field(fields: dict[str, object], param: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_chat(body(**fields), SERVED)
    assert caught.value.status == 400
    assert caught.value.param == param
    assert caught.value.message.startswith(param) or param in caught.value.message


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]"])
def test_a_body_that_is_not_an_object_is_400(raw: bytes) -> None:
    with pytest.raises(ApiError, match="request body"):
        parse_chat(raw, SERVED)


@pytest.mark.parametrize(
    ("prompt", "expected"), [("text", "text"), (["text"], "text"), ([1, 2], (1, 2)), ([[1, 2]], (1, 2))]
)
def test_a_completion_prompt_is_text_or_token_ids(prompt: object, expected: object) -> None:
    raw = orjson.dumps({"model": "alias", "prompt": prompt})
    assert parse_completion(raw, SERVED).prompt == expected


def test_several_completion_prompts_are_refused() -> None:
    with pytest.raises(ApiError, match="one prompt per request"):
        parse_completion(orjson.dumps({"model": "m", "prompt": ["a", "b"]}), SERVED)


def test_embedding_inputs_and_encoding() -> None:
    raw = orjson.dumps({"model": "m", "input": ["a", [1, 2]], "encoding_format": "base64", "dimensions": 8})
    parsed = parse_embedding(raw, SERVED, 16)
    assert parsed.inputs == ("a", (1, 2))
    assert parsed.base64
    assert parsed.dimensions == 8


@pytest.mark.parametrize(
    ("fields", "param"),
    [({"input": 5}, "input"), ({"input": "a", "encoding_format": "hex"}, "encoding_format"),
     ({"input": "a", "dimensions": 99}, "dimensions"), ({"input": ["a", 5]}, "input")],
)  # fmt: skip
def test_bad_embedding_fields_are_400(fields: dict[str, object], param: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_embedding(orjson.dumps({"model": "m", **fields}), SERVED, 16)
    assert caught.value.param == param

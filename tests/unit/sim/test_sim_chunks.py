"""Streamed chunks: the pre-encoded bytes are exactly the JSON of vLLM's chunk objects."""

from __future__ import annotations

import orjson
import pytest

from llmgw.sim.chunks import DONE, StreamChunks, chat_response, completion_response, usage


def decode(event: bytes) -> object:
    assert event.startswith(b"data: ")
    assert event.endswith(b"\n\n")
    return orjson.loads(event[6:-2])


@pytest.mark.parametrize("chat", [True, False])
@pytest.mark.parametrize("include_usage", [True, False])
@pytest.mark.parametrize(
    ("text", "reason"), [(" hello", None), ('quote " and \\ \n', "length"), ("", "stop")]
)
def test_token_bytes_are_the_json_of_the_chunk(
    chat: bool, include_usage: bool, text: str, reason: str | None
) -> None:
    chunks = StreamChunks(
        chat=chat, response_id="chatcmpl-1", created=1700000000, model='m "x"', include_usage=include_usage
    )
    event = chunks.token(text, reason)
    assert decode(event) == chunks.token_payload(text, reason)
    payload = chunks.token_payload(text, reason)
    assert payload["object"] == ("chat.completion.chunk" if chat else "text_completion")
    assert ("usage" in payload) is include_usage


def test_the_chat_stream_opens_with_the_assistant_role() -> None:
    chunks = StreamChunks(chat=True, response_id="c", created=1, model="m", include_usage=True)
    opening = decode(chunks.role())
    assert opening == {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                     "finish_reason": None}],
        "usage": None,
    }  # fmt: skip


def test_the_usage_chunk_has_no_choices_and_exact_counts() -> None:
    chunks = StreamChunks(chat=True, response_id="c", created=1, model="m", include_usage=True)
    event = decode(chunks.usage(usage(10, 5, None)))
    assert event == {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [],
        "usage": {
            "prompt_tokens": 10,
            "total_tokens": 15,
            "completion_tokens": 5,
            "prompt_tokens_details": None,
        },
    }
    assert DONE == b"data: [DONE]\n\n"


def test_usage_details_show_cached_tokens_when_enabled() -> None:
    assert usage(10, 5, 8)["prompt_tokens_details"] == {"cached_tokens": 8}


def test_whole_answers_have_vllm_shapes() -> None:
    info = usage(3, 2, None)
    chat = chat_response(
        response_id="c", created=1, model="m", text="hi", finish_reason="stop", usage_info=info
    )
    assert chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"]["content"] == "hi"
    assert chat["choices"][0]["finish_reason"] == "stop"
    text = completion_response(response_id="t", created=1, model="m", text="x", finish_reason="length",
                               usage_info=info)  # fmt: skip
    assert text["object"] == "text_completion"
    assert text["choices"][0]["text"] == "x"
    assert text["usage"]["total_tokens"] == 5

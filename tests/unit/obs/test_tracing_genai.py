"""The GenAI attributes read from an answer: a whole one's JSON, or a stream's last
events (the finish reason in the last content chunk, the usage after it)."""

from __future__ import annotations

import orjson

from llmgw.obs.genai import from_answer, from_stream_tail

ANSWER = orjson.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "org/m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"},
            {"index": 1, "message": {"role": "assistant", "content": "hi there"}, "finish_reason": "length"},
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }
)


def chunk(**fields: object) -> bytes:
    return b"data: " + orjson.dumps({"id": "c", "model": "org/m", **fields}) + b"\n\n"


def test_a_whole_answer_gives_model_tokens_and_finish_reasons() -> None:
    assert from_answer(ANSWER) == {
        "gen_ai.response.model": "org/m",
        "gen_ai.response.id": "chatcmpl-1",
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 3,
        "gen_ai.response.finish_reasons": ("stop", "length"),
    }


def test_an_error_or_a_body_that_is_not_json_gives_nothing_it_does_not_say() -> None:
    assert from_answer(b"not json") == {}
    assert from_answer(b'{"error": {"message": "x"}}') == {}
    assert from_answer(b"[1, 2]") == {}


def test_a_streams_tail_gives_the_finish_reason_and_the_usage() -> None:
    content = chunk(choices=[{"index": 0, "delta": {"content": "tok"}, "finish_reason": None}])
    last = chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "length"}])
    usage = chunk(choices=[], usage={"prompt_tokens": 5, "completion_tokens": 4})
    stream = content * 3 + last + usage + b"data: [DONE]\n\n"
    # The tail starts inside an event: that one is skipped, whatever it held.
    tail = stream[len(content) // 2 :]
    assert from_stream_tail(tail) == {
        "gen_ai.response.model": "org/m",
        "gen_ai.response.id": "c",
        "gen_ai.response.finish_reasons": ("length",),
        "gen_ai.usage.input_tokens": 5,
        "gen_ai.usage.output_tokens": 4,
    }


def test_only_the_last_finish_reason_of_a_stream_is_read() -> None:
    # Read back from the end, the walk stops at the last chunk naming a finish reason.
    early = chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
    last = chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "length"}])
    assert from_stream_tail(b"x\n\n" + early + last)["gen_ai.response.finish_reasons"] == ("length",)

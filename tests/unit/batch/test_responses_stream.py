"""A chat stream as the Responses event sequence, checked against the openai SDK's own
event types."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest

from llmgw.batch.responses_request import parse_request
from llmgw.batch.responses_stream import StreamTranslator, encode

responses = pytest.importorskip("openai.types.responses")


def _translator(**body: Any) -> StreamTranslator:
    counter = itertools.count(1)
    request = parse_request(
        orjson.dumps({"model": "m", "input": "hi", "stream": True, **body}), lambda p: f"{p}_{next(counter)}"
    )
    return StreamTranslator(request, "resp_1", 1700000000, lambda p: f"{p}_{next(counter)}")


def _chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, usage: Any = None
) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"choices": choices, "usage": usage}


def _valid(events: list[dict[str, Any]]) -> None:
    adapter = __import__("pydantic").TypeAdapter(responses.ResponseStreamEvent)
    for event in events:
        adapter.validate_python(event)


def test_text_deltas_make_the_sequence_the_sdk_expects() -> None:
    translator = _translator()
    events = translator.start()
    events += translator.feed(_chunk({"role": "assistant", "content": "Hel"}))
    events += translator.feed(_chunk({"content": "lo"}, finish="stop"))
    events += translator.feed(_chunk(usage={"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}))
    events += translator.finish()
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(10))
    _valid(events)
    assert events[6]["text"] == "Hello"
    assert events[-1]["response"]["usage"]["total_tokens"] == 4
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "Hello"
    assert events[0]["response"]["output"] == []  # what was sent is never changed afterwards


def test_tool_call_deltas_make_a_function_call_item() -> None:
    translator = _translator()
    events = translator.start()
    call = {"index": 0, "id": "call_7", "type": "function", "function": {"name": "f", "arguments": '{"a"'}}
    events += translator.feed(_chunk({"tool_calls": [call]}))
    events += translator.feed(
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}, "tool_calls")
    )
    events += translator.finish()
    kinds = [e["type"] for e in events]
    assert kinds[2:] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    _valid(events)
    item = events[-1]["response"]["output"][0]
    assert (item["call_id"], item["name"], item["arguments"]) == ("call_7", "f", '{"a":1}')


def test_a_cut_stream_ends_incomplete_and_a_broken_one_failed() -> None:
    cut = _translator()
    cut.start()
    cut.feed(_chunk({"content": "x"}, finish="length"))
    assert cut.finish()[-1]["type"] == "response.incomplete"
    broken = _translator()
    broken.start()
    [failed] = broken.fail("the replica went away")
    assert failed["type"] == "response.failed"
    assert failed["response"]["error"]["message"] == "the replica went away"
    _valid([failed])


def test_an_event_is_framed_as_server_sent_events() -> None:
    framed = encode({"type": "response.in_progress", "sequence_number": 1})
    assert (
        framed
        == b'event: response.in_progress\ndata: {"type":"response.in_progress","sequence_number":1}\n\n'
    )

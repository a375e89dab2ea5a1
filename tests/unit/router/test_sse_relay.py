"""Relaying a replica's event stream: whole events only, however the bytes were cut on
the way; the usage event (the chunk whose `choices` is empty) read for accounting and
left out when the gateway asked for it on the client's behalf; `[DONE]` noticed."""

from __future__ import annotations

import itertools

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgw.router.sse import SseRelay

_CHUNK = {"id": "chatcmpl-7f3a", "object": "chat.completion.chunk", "created": 1718000000, "model": "chat"}


def _event(payload: bytes) -> bytes:
    return b"data: " + payload + b"\n\n"


def _chunk(choices: list[dict[str, object]], **extra: object) -> bytes:
    # vLLM writes its chunks compact, as orjson does.
    return orjson.dumps({**_CHUNK, "choices": choices, **extra})


def _usage_json(prompt: int, completion: int) -> bytes:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return _chunk([], usage=usage)


def vllm_stream(pieces: list[str], *, usage: bool = True) -> tuple[bytes, bytes]:
    """A chat stream as vLLM writes it, and its usage event's JSON (the payload after
    `data: `): role chunk, one chunk per piece, finish chunk, usage chunk, [DONE]."""
    events = [_chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])]
    events += [
        _chunk([{"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}])
        for text in pieces
    ]
    events.append(_chunk([{"index": 0, "delta": {}, "finish_reason": "stop", "stop_reason": None}]))
    usage_json = _usage_json(11, len(pieces))
    if usage:
        events.append(usage_json)
    return b"".join(_event(e) for e in events) + b"data: [DONE]\n\n", usage_json


def _relay_all(relay: SseRelay, parts: list[bytes]) -> list[bytes]:
    return [relay.feed(part) for part in parts]


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


# --- the property: any cut of a realistic stream ---------------------------------------------

# Content that looks like the protocol: quotes, braces, blank lines, the usage mark and
# the words `data:` and [DONE] inside a token's text (escaped by JSON, as a replica does).
_content = st.lists(
    st.one_of(
        st.text(max_size=12),
        st.sampled_from(['"choices":[]', "data: [DONE]", "\n\n", "}\n\ndata: {", "é😀", " "]),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(pieces=_content, cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=40))
def test_any_cut_of_a_stream_relays_whole_events_and_keeps_the_bytes(
    pieces: list[str], cuts: list[int]
) -> None:
    stream, usage_json = vllm_stream(pieces)
    usage_event = _event(usage_json)
    assert stream.count(usage_event) == 1
    without_usage = stream.replace(usage_event, b"")
    parts = _cut(stream, cuts)

    for strip, expected in ((False, stream), (True, without_usage)):
        relay = SseRelay(strip_usage=strip)
        outputs = _relay_all(relay, parts)
        tail = relay.flush()
        assert b"".join(outputs) + tail == expected
        assert tail == b""
        assert relay.usage_event == usage_json
        assert orjson.loads(relay.usage_event)["usage"]["completion_tokens"] == len(pieces)
        assert relay.done is True
        for out in outputs:
            if out:
                assert out.endswith(b"\n\n")


@settings(max_examples=64, deadline=None, derandomize=True, database=None)
@given(size=st.integers(min_value=1, max_value=64))
def test_fixed_size_reads_relay_whole_events(size: int) -> None:
    stream, _ = vllm_stream(["Hello", ",", " world", "!"])
    relay = SseRelay(strip_usage=False)
    outputs = _relay_all(relay, [stream[i : i + size] for i in range(0, len(stream), size)])
    assert b"".join(outputs) == stream
    # Each output ends at a boundary and holds only whole events.
    for out in filter(None, outputs):
        assert out.startswith(b"data: ")
        assert out.endswith(b"\n\n")


# --- named scenarios ----------------------------------------------------------------------


def test_one_byte_at_a_time_forwards_each_event_when_its_blank_line_arrives() -> None:
    stream, _ = vllm_stream(["a", "b"])
    events = [e + b"\n\n" for e in stream.split(b"\n\n") if e]
    relay = SseRelay(strip_usage=False)
    outputs = [out for out in _relay_all(relay, [stream[i : i + 1] for i in range(len(stream))]) if out]
    assert outputs == events


def test_half_an_event_is_held_until_the_rest_arrives() -> None:
    relay = SseRelay(strip_usage=False)
    first = _event(b'{"choices":[{"delta":{"content":"a"}}]}')
    assert relay.feed(first + b'data: {"choices":[{"del') == first
    assert relay.feed(b'ta":{"content":"b"}}]}\n') == b""
    assert relay.feed(b"\n") == b'data: {"choices":[{"delta":{"content":"b"}}]}\n\n'
    assert relay.flush() == b""


def test_a_blank_line_split_between_two_reads_still_ends_the_event() -> None:
    relay = SseRelay(strip_usage=False)
    assert relay.feed(b'data: {"x":1}\n') == b""
    assert relay.feed(b'\ndata: {"x":2}') == b'data: {"x":1}\n\n'
    assert relay.feed(b"\n\n") == b'data: {"x":2}\n\n'


def test_the_usage_event_is_kept_aside_and_stripped_when_the_gateway_asked_for_it() -> None:
    stream, usage_json = vllm_stream(["Hi"])
    relay = SseRelay(strip_usage=True)
    out = relay.feed(stream)
    assert usage_json not in out
    assert b'"choices":[]' not in out
    assert out.endswith(b"data: [DONE]\n\n")
    assert out.count(b"\n\n") == stream.count(b"\n\n") - 1
    assert relay.usage_event == usage_json


def test_the_usage_event_is_forwarded_when_the_client_asked_for_it() -> None:
    stream, usage_json = vllm_stream(["Hi"])
    relay = SseRelay(strip_usage=False)
    assert relay.feed(stream) == stream
    assert relay.usage_event == usage_json


def test_a_usage_event_arriving_alone_and_stripped_leaves_nothing_to_send() -> None:
    relay = SseRelay(strip_usage=True)
    usage_json = _usage_json(3, 4)
    assert relay.feed(_event(usage_json)) == b""
    assert relay.usage_event == usage_json
    assert relay.feed(b"data: [DONE]\n\n") == b"data: [DONE]\n\n"
    assert relay.done is True


def test_a_stream_without_usage_reports_none() -> None:
    stream, _ = vllm_stream(["no", " usage"], usage=False)
    relay = SseRelay(strip_usage=True)
    assert relay.feed(stream) + relay.flush() == stream
    assert relay.usage_event is None
    assert relay.done is True


def test_a_finish_chunk_is_not_taken_for_usage() -> None:
    # The last content chunk may carry usage too (continuous usage); only empty choices count.
    finish = _chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}], usage={"total_tokens": 5})
    relay = SseRelay(strip_usage=True)
    assert relay.feed(_event(finish)) == _event(finish)
    assert relay.usage_event is None


DONE_CASES = [
    pytest.param([b'data: {"choices":[]}\n\n'], b'data: {"choices":[]}\n\n', False, id="no-done"),
    pytest.param([b"data: [DONE]\n\n"], b"data: [DONE]\n\n", True, id="done-event"),
    pytest.param([b"data:[DONE]\n\n"], b"data:[DONE]\n\n", True, id="done-without-space"),
    pytest.param([b"data: [DONE]\r\n\r\n"], b"data: [DONE]\n\n", True, id="done-crlf"),
    pytest.param([b"data: [DONE]\r\r"], b"data: [DONE]\n\n", True, id="done-cr"),
    pytest.param([b": bye\ndata: [DONE]\n\n"], b": bye\ndata: [DONE]\n\n", True, id="done-after-a-comment"),
    pytest.param([b"data: [DO", b"NE]\n\n"], b"data: [DONE]\n\n", True, id="done-split-across-reads"),
    # At the end of the body a last [DONE] without its blank line is completed, so that
    # the client reads it as an event (the rules drop an event left unfinished).
    pytest.param([b"data: [DONE]"], b"data: [DONE]\n\n", True, id="done-without-blank-line-completed"),
    pytest.param([b"data: [DONE]\n"], b"data: [DONE]\n\n", True, id="done-with-half-a-blank-line"),
    pytest.param([b"data: [DONE]\r"], b"data: [DONE]\n\n", True, id="done-with-half-a-cr-blank-line"),
    # Any other unfinished event is dropped: an error event follows, and must stand alone.
    pytest.param([b'data: {"choices":[{"delta":{"content":"a"}}]}'], b"", False, id="unfinished-content"),
    pytest.param([b"data: [DONE]x\n"], b"data: [DONE]x\n\n", True, id="done-with-more-as-the-sdk-reads-it"),
    pytest.param([b"data: [DON\n\n"], b"data: [DON\n\n", False, id="not-quite-done"),
    pytest.param(
        [b"data: x\ndata: [DONE]\n\n"], b"data: x\ndata: [DONE]\n\n", False, id="done-on-a-later-data-line"
    ),
    pytest.param([b"event: done\n\n"], b"event: done\n\n", False, id="not-the-data-field"),
]


@pytest.mark.parametrize(("parts", "forwarded", "done"), DONE_CASES)
def test_done_is_noticed_however_the_stream_ends(parts: list[bytes], forwarded: bytes, done: bool) -> None:
    relay = SseRelay(strip_usage=False)
    assert b"".join(_relay_all(relay, parts)) + relay.flush() == forwarded
    assert relay.done is done


def test_done_is_not_set_before_its_event_is_whole() -> None:
    relay = SseRelay(strip_usage=False)
    relay.feed(b"data: [DONE]")
    assert relay.done is False
    relay.feed(b"\n\n")
    assert relay.done is True


def test_an_unfinished_event_at_the_end_is_dropped_once() -> None:
    relay = SseRelay(strip_usage=False)
    assert relay.feed(b'data: {"partial"') == b""
    assert relay.flush() == b""
    assert relay.done is False
    assert relay.feed(b"data: [DONE]\n\n") == b"data: [DONE]\n\n"
    assert relay.flush() == b""


def test_a_stream_that_never_draws_a_boundary_is_forwarded_past_the_bound() -> None:
    # One megabyte without a blank line is not an event stream; holding it would only grow.
    relay = SseRelay(strip_usage=False)
    block = b"x" * (1 << 19)
    assert relay.feed(block) == b""
    assert relay.feed(block) == b""  # exactly at the bound: still held
    assert relay.feed(b"y") == block + block + b"y"
    assert relay.flush() == b""


def test_done_in_a_tokens_text_does_not_end_the_stream() -> None:
    stream, _ = vllm_stream(["Each stream ends with ", "data: [DONE]", " on a line of its own"], usage=False)
    assert b'"content":"data: [DONE]"' in stream
    cut_off = stream[: stream.index(b"data: [DONE]\n\n")]  # the replica died before its last event
    relay = SseRelay(strip_usage=False)
    assert relay.feed(cut_off) + relay.flush() == cut_off
    assert relay.done is False

"""The relay by the event-stream rules (WHATWG HTML, "server-sent events"): lines end with
LF, CRLF or CR, a CR and an LF in two reads being one line ending; an event ends at a
blank line; `data:` with or without its space; comments. The usage event is found by
its JSON however it is spelled and framed. The property: any framing of the same events,
cut anywhere, reaches a client as the same events, with the usage of the last one read."""

from __future__ import annotations

import itertools
import re

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgw.router.sse import SseRelay, event_data, is_usage_chunk

_LINE_END = re.compile(rb"\r\n|\r|\n")


def client_events(stream: bytes) -> list[bytes]:
    """The data of each event a client dispatches, read by the rules on their own (not
    the relay's code): a line ends at CRLF, LF or CR; a blank line dispatches the event
    if it has data; lines starting with a colon are comments; one space after the colon
    is dropped; what follows the last line ending is an unfinished line, discarded."""
    events: list[bytes] = []
    data: list[bytes] | None = None
    for line in _LINE_END.split(stream)[:-1]:
        if not line:
            if data is not None:
                events.append(b"\n".join(data))
            data = None
            continue
        if line.startswith(b":"):
            continue
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            data = [*(data or []), value]
    return events


def relay_all(parts: list[bytes], *, strip: bool = False) -> tuple[bytes, SseRelay]:
    relay = SseRelay(strip_usage=strip)
    out = b"".join(relay.feed(part) for part in parts)
    return out + relay.flush(), relay


def _usage(prompt: int, completion: int) -> dict[str, object]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _spaced(value: object) -> bytes:
    """JSON as Python's json module and sse-starlette write it: a space after `:` and `,`."""
    import json

    return json.dumps(value).encode()


# --- line endings ----------------------------------------------------------------------------

FRAMINGS = [
    pytest.param(b"\n", id="lf"),
    pytest.param(b"\r\n", id="crlf"),
    pytest.param(b"\r", id="cr"),
]


@pytest.mark.parametrize("end", FRAMINGS)
def test_each_line_ending_frames_events_forwarded_as_they_arrive(end: bytes) -> None:
    events = [b'{"choices":[{"delta":{"content":"a"}}]}', b'{"choices":[{"delta":{"content":"b"}}]}']
    stream = b"".join(b"data: " + e + end + end for e in events) + b"data: [DONE]" + end + end
    relay = SseRelay(strip_usage=False)
    outputs = [relay.feed(b"data: " + e + end + end) for e in events]
    # Each event goes out when its blank line arrives, not at the end of the stream.
    assert outputs == [b"data: " + e + b"\n\n" for e in events]
    assert relay.feed(b"data: [DONE]" + end + end) == b"data: [DONE]\n\n"
    assert relay.flush() == b""
    assert relay.done is True
    assert client_events(b"".join(outputs)) == client_events(stream)[:2]


def test_an_lf_stream_is_forwarded_byte_for_byte() -> None:
    stream = b': keep-alive\n\nid: 7\nevent: message\ndata:{"choices":[]}\n\ndata: [DONE]\n\n'
    assert relay_all([stream])[0] == stream


def test_mixed_line_endings_in_one_stream() -> None:
    stream = b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r: note\r\ndata: [DONE]\n\r"
    out, relay = relay_all([stream])
    assert out == b"data: a\ndata: b\ndata: c\n\ndata: d\n\n: note\ndata: [DONE]\n\n"
    assert client_events(out) == client_events(stream) == [b"a\nb\nc", b"d", b"[DONE]"]
    assert relay.done is True


def test_a_cr_ending_one_read_and_an_lf_opening_the_next_are_one_line_ending() -> None:
    relay = SseRelay(strip_usage=False)
    assert relay.feed(b"data: a\r") == b""
    # Were the LF a line ending of its own, this would be a blank line ending the event.
    assert relay.feed(b"\ndata: b\r") == b""
    assert relay.feed(b"\n\r") == b"data: a\ndata: b\n\n"
    assert relay.feed(b"\n") == b""  # the rest of the CRLF that ended the event
    assert relay.feed(b"data: [DONE]\r\n\r\n") == b"data: [DONE]\n\n"
    assert relay.done is True


def test_a_cr_then_a_cr_in_the_next_read_is_a_blank_line() -> None:
    relay = SseRelay(strip_usage=False)
    assert relay.feed(b"data: a\r") == b""
    assert relay.feed(b"\r") == b"data: a\n\n"


def test_an_lf_after_a_cr_read_only_once() -> None:
    # The LF that completes a CRLF is dropped, the next one is a line ending again.
    relay = SseRelay(strip_usage=False)
    assert relay.feed(b"data: a\r") == b""
    assert relay.feed(b"\n") == b""
    assert relay.feed(b"\n") == b"data: a\n\n"


def test_comments_and_fields_pass_through_and_comments_hold_no_usage() -> None:
    # A comment that looks like usage is not an event: nothing is taken for usage.
    stream = b': {"choices": [], "usage": {"prompt_tokens": 9}}\r\n\r\nid: 1\r\ndata: x\r\n\r\n'
    out, relay = relay_all([stream], strip=True)
    assert out == stream.replace(b"\r\n", b"\n")
    assert relay.usage_event is None


# --- the usage event ------------------------------------------------------------------------

USAGE_SPELLINGS = [
    pytest.param(orjson.dumps(_usage(11, 5)), id="compact"),
    pytest.param(_spaced(_usage(11, 5)), id="spaced"),
    pytest.param(orjson.dumps(_usage(11, 5), option=orjson.OPT_INDENT_2), id="indented-over-data-lines"),
    pytest.param(b'{"usage":{"prompt_tokens":11,"completion_tokens":5},"choices" : [ ]}', id="usage-first"),
]


@pytest.mark.parametrize("usage_json", USAGE_SPELLINGS)
@pytest.mark.parametrize("end", FRAMINGS)
@pytest.mark.parametrize("space", [b" ", b""], ids=["data-space", "data-no-space"])
def test_the_usage_event_is_found_by_its_json(usage_json: bytes, end: bytes, space: bytes) -> None:
    content = _spaced({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]})
    # A line of indented JSON keeps the space a client drops after the colon.
    lines = usage_json.split(b"\n")
    usage_event = (
        b"".join(b"data:" + (b" " if line[:1] == b" " else space) + line + end for line in lines) + end
    )
    stream = b"data:" + space + content + end + end + usage_event + b"data:" + space + b"[DONE]" + end + end
    for strip in (False, True):
        out, relay = relay_all([stream], strip=strip)
        assert relay.usage_event is not None
        assert orjson.loads(relay.usage_event)["usage"] == {"prompt_tokens": 11, "completion_tokens": 5} | (
            {"total_tokens": 16} if b"total_tokens" in usage_json else {}
        )
        expected = [content, b"[DONE]"] if strip else [content, usage_json, b"[DONE]"]
        assert client_events(out) == expected
        assert relay.done is True


def test_continuous_usage_on_content_chunks_is_not_the_usage_event() -> None:
    # vLLM's continuous_usage_stats put usage on every chunk; only the empty-choices one counts.
    chunk = _spaced(
        {"choices": [{"delta": {"content": "a"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
    )
    usage = _spaced(_usage(1, 2))
    stream = b"data: " + chunk + b"\r\n\r\ndata: " + usage + b"\r\n\r\ndata: [DONE]\r\n\r\n"
    out, relay = relay_all([stream], strip=True)
    assert client_events(out) == [chunk, b"[DONE]"]
    assert relay.usage_event == usage


def test_an_event_naming_usage_that_is_not_json_is_forwarded() -> None:
    stream = b'data: "usage" is not a chunk\n\ndata: {"usage": 3, "choices": []}\n\n'
    out, relay = relay_all([stream], strip=True)
    assert out == stream
    assert relay.usage_event is None


def test_event_data_by_the_rules() -> None:
    assert event_data(b"data: a\ndata:b\ndata\ndata:  c") == b"a\nb\n\n c"
    assert event_data(b": comment\nid: 3\nevent: x") is None
    assert event_data(b"dataset: not data\ndata: yes") == b"yes"


def test_is_usage_chunk_reads_json() -> None:
    assert is_usage_chunk(b'{ "choices" : [ ] , "usage" : { } }')
    assert not is_usage_chunk(b'{"choices": [{}], "usage": {}}')
    assert not is_usage_chunk(b'{"choices": [], "usage": null}')
    assert not is_usage_chunk(b'[{"choices": [], "usage": {}}]')
    assert not is_usage_chunk(b'{"choices": [], "usage": {}')


# --- the property ---------------------------------------------------------------------------

# Values a data line may hold: anything but a line ending (no CR, no LF), including text
# that looks like the protocol.
_value = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=10),
    st.sampled_from(["[DONE]x", '"usage"', '"choices": []', "data: x", ":", " lead"]),
).map(lambda text: text.encode())
_content_event = st.lists(_value, min_size=1, max_size=3).map(
    lambda values: (
        [orjson.dumps({"choices": [{"delta": {"content": v.decode()}}]}) for v in values[:1]] + values[1:]
    )
)
_usage_json = st.builds(
    lambda prompt, completion, how: (
        orjson.dumps(_usage(prompt, completion))
        if how == 0
        else _spaced(_usage(prompt, completion))
        if how == 1
        else orjson.dumps(_usage(prompt, completion), option=orjson.OPT_INDENT_2)
    ),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 2),
)
_ENDS = [b"\n", b"\r\n", b"\r"]


@st.composite
def framed_streams(draw: st.DrawFn) -> tuple[list[list[bytes]], bytes, bytes]:
    """Events (each a list of data values, the usage event's its JSON's lines, then
    [DONE]), the stream framing them with a line ending drawn per line, comments and
    `data:` with or without its space; and the usage JSON."""
    events: list[list[bytes]] = draw(st.lists(_content_event, max_size=6))
    usage_json = draw(_usage_json)
    events.append(usage_json.split(b"\n"))
    events.append([b"[DONE]"])
    out: list[bytes] = []
    previous = b""

    def end() -> bytes:
        nonlocal previous
        choice = _ENDS[draw(st.integers(0, 2))]
        # A lone CR then an LF would be one line ending: draw CRLF or CR there instead.
        if previous == b"\r" and choice == b"\n":
            choice = b"\r\n"
        previous = choice
        return choice

    for values in events:
        for value in values:
            if draw(st.booleans()) and draw(st.booleans()):
                out.append(b': comment [DONE] "usage"' + end())
            # `data:value` only where the value does not start with a space, which a
            # client would take for the optional one.
            space = b" " if value.startswith(b" ") or draw(st.booleans()) else b""
            out.append(b"data:" + space + value + end())
        out.append(end())
    return events, b"".join(out), usage_json


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    return [data[a:b] for a, b in itertools.pairwise([0, *points, len(data)])]


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(
    framed=framed_streams(),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30),
    after_crs=st.lists(st.integers(min_value=0, max_value=60), max_size=10),
)
def test_any_framing_cut_anywhere_relays_the_same_events(
    framed: tuple[list[list[bytes]], bytes, bytes], cuts: list[int], after_crs: list[int]
) -> None:
    events, stream, usage_json = framed
    originals = [b"\n".join(values) for values in events]
    assert client_events(stream) == originals  # the framing is what was meant
    # Cuts anywhere, and some right after a CR, where a CRLF splits into two reads.
    crs = [m.end() for m in re.finditer(rb"\r", stream)]
    parts = _cut(stream, cuts + [crs[i % len(crs)] for i in after_crs if crs])
    for strip in (False, True):
        relay = SseRelay(strip_usage=strip)
        outputs = [relay.feed(part) for part in parts]
        tail = relay.flush()
        assert tail == b""
        for out in filter(None, outputs):
            assert out.endswith(b"\n\n")  # whole events only
            assert b"\r" not in out
        expected = [e for e in originals if e != usage_json] if strip else originals
        assert client_events(b"".join(outputs)) == expected
        assert relay.usage_event is not None
        assert orjson.loads(relay.usage_event) == orjson.loads(usage_json)
        assert relay.done is True

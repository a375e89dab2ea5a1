"""Relaying a replica's event stream: whole events only, usage read from its JSON.

The relay cuts the stream at event boundaries (a blank line), so a client never
receives half an event. Lines may end with LF, CRLF or CR (the WHATWG "server-sent
events" rules; sse-starlette, behind many servers, writes CRLF). A stream that uses only
LF, as engines do, is forwarded byte for byte. One with a CR in it is rewritten to LF
only: that is the one framing in which a blank line is one pattern (`\\n\\n`) to search
for, a CR and an LF arriving in two reads are one line ending rather than two, and every
client parser reads it; the events a client parses are the same, since a CR can only
ever end a line. The check costs one scan for a CR per read.

The usage event (a chunk with `"choices": []` and a `usage` object) is found by decoding
its JSON, never by matching how it is spelled: only events that hold the key `"usage"`
are decoded, normally the one usage event of a stream. It is kept aside for accounting
and, when the gateway asked for usage on the client's behalf, left out of what the
client receives. The end of the stream, `data: [DONE]`, is likewise read as an event.
"""

from __future__ import annotations

import orjson

_BOUNDARY = b"\n\n"
# Every JSON writer spells an object's key `usage` as these bytes: an event without them
# carries no usage, and is not decoded.
_USAGE_KEY = b'"usage"'
_DONE = b"[DONE]"
_DONE_EVENT = b"data: [DONE]"
# A stream that never draws a boundary is forwarded as it is past this many bytes.
_MAX_HELD_BYTES = 1 << 20


class SseRelay:
    """Cuts a stream into whole events and picks out the usage event."""

    __slots__ = ("_after_cr", "_held", "done", "strip_usage", "usage_event")

    def __init__(self, *, strip_usage: bool) -> None:
        self.strip_usage = strip_usage
        self.usage_event: bytes | None = None
        """The usage event's data (its JSON), once seen."""
        self.done = False
        self._held = b""
        # The last read ended with a CR: an LF opening the next one belongs to it.
        self._after_cr = False

    def feed(self, chunk: bytes) -> bytes:
        """Takes what arrived; returns the whole events to forward now (maybe none)."""
        if self._after_cr and chunk:
            self._after_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        # find, not `in`: `in` first tries the bytes as an integer, and raising that
        # TypeError costs more than the search.
        if chunk.find(b"\r") >= 0:
            self._after_cr = chunk[-1:] == b"\r"
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        data = self._held + chunk if self._held else chunk
        cut = data.rfind(_BOUNDARY)
        if cut < 0:
            if len(data) > _MAX_HELD_BYTES:
                self._held = b""
                return data
            self._held = data
            return b""
        cut += len(_BOUNDARY)
        out, self._held = data[:cut], data[cut:]
        if out.find(_USAGE_KEY) >= 0:
            out = self._take_usage(out)
        if not self.done and out.find(_DONE) >= 0:
            self.done = _ends_stream(out)
        return out

    def flush(self) -> bytes:
        """What to forward when the replica's body has ended. A last event without its
        blank line is forwarded whole only when it is `[DONE]`; any other is incomplete,
        and a client would drop it (the rules say so), so it is dropped here, which also
        keeps an error event that follows from being read as part of it."""
        rest, self._held = self._held, b""
        if self.done or not rest.strip(b"\n"):
            return b""
        if rest.find(_DONE) >= 0 and _ends_stream(rest + _BOUNDARY):
            self.done = True
            return rest.rstrip(b"\n") + _BOUNDARY
        return b""

    def _take_usage(self, out: bytes) -> bytes:
        """Records the last usage event in `out`, and takes it out when asked to."""
        pos = out.rfind(_USAGE_KEY)
        while pos >= 0:
            start, stop = _event_around(out, pos)
            payload = event_data(out[start:stop])
            if payload is not None and is_usage_chunk(payload):
                self.usage_event = payload
                if self.strip_usage:
                    out = out[:start] + out[stop + len(_BOUNDARY) :]
                return out
            pos = out.rfind(_USAGE_KEY, 0, start)
        return out


def is_usage_chunk(payload: bytes) -> bool:
    """Whether an event's JSON is the usage chunk: empty `choices` and a `usage` object."""
    try:
        chunk = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return False
    return isinstance(chunk, dict) and chunk.get("choices") == [] and isinstance(chunk.get("usage"), dict)


def event_data(event: bytes) -> bytes | None:
    """The data of one event (LF line endings, no blank line): its `data` fields' values
    joined with LF, as a client reads them; None when it has no `data` field."""
    parts: list[bytes] = []
    for line in event.split(b"\n"):
        if not line.startswith(b"data"):
            continue  # another field, a comment (`:`), or an empty line
        if len(line) == 4:
            parts.append(b"")
        elif line[4] == 0x3A:  # the field name ends at the first colon
            parts.append(line[6:] if line[5:6] == b" " else line[5:])
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else b"\n".join(parts)


def _event_around(events: bytes, pos: int) -> tuple[int, int]:
    """Where the event holding `events[pos]` starts and where its blank line starts;
    `events` ends with a blank line."""
    start = events.rfind(_BOUNDARY, 0, pos)
    start = 0 if start < 0 else start + len(_BOUNDARY)
    return start, events.find(_BOUNDARY, pos)


def _ends_stream(events: bytes) -> bool:
    """Whether whole events include the closing `[DONE]` event. Only as an event of its
    own: a model may well write those bytes inside an answer, where they are JSON."""
    pos = events.rfind(_DONE)
    while pos >= 0:
        start, stop = _event_around(events, pos)
        event = events[start:stop]
        if event == _DONE_EVENT:
            return True
        data = event_data(event)
        # As OpenAI's SDK reads it: data that starts with [DONE].
        if data is not None and data.startswith(_DONE):
            return True
        pos = events.rfind(_DONE, 0, start)
    return False

"""Relaying a replica's event stream: whole events only, usage read from the last one.

The relay does not decode the events it forwards. It only cuts the stream at event
boundaries (a blank line), so a client never receives half an event, and recognises
the one event that carries usage, the chunk whose `choices` is empty, by its bytes.
That event is kept aside for accounting and, when the gateway asked for usage on the
client's behalf, left out of what the client receives.
"""

from __future__ import annotations

_BOUNDARY = b"\n\n"
_USAGE_MARK = b'"choices":[]'
_DATA = b"data: "
_DONE = b"data: [DONE]"
_DONE_AFTER_EVENT = b"\n\ndata: [DONE]"
# A stream that never draws a boundary is forwarded as it is past this many bytes.
_MAX_HELD_BYTES = 1 << 20


class SseRelay:
    """Cuts a stream into whole events and picks out the usage event."""

    __slots__ = ("_held", "done", "strip_usage", "usage_event")

    def __init__(self, *, strip_usage: bool) -> None:
        self.strip_usage = strip_usage
        self.usage_event: bytes | None = None
        self.done = False
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        """Takes what arrived; returns the whole events to forward now (maybe none)."""
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
        mark = out.find(_USAGE_MARK)
        if mark >= 0:
            start = out.rfind(_DATA, 0, mark)
            stop = out.find(_BOUNDARY, mark)
            if start >= 0 and stop >= 0:
                self.usage_event = out[start + len(_DATA) : stop]
                if self.strip_usage:
                    out = out[:start] + out[stop + len(_BOUNDARY) :]
        if not self.done and _ends_stream(out):
            self.done = True
        return out

    def flush(self) -> bytes:
        """Whatever is held when the stream ends."""
        rest, self._held = self._held, b""
        if _ends_stream(rest):
            self.done = True
        return rest


def _ends_stream(events: bytes) -> bool:
    """Whether whole events include the closing `data: [DONE]` event. Only as an event
    of its own: a model may well write those bytes inside an answer, where JSON leaves
    them as they are."""
    return events.startswith(_DONE) or events.find(_DONE_AFTER_EVENT) >= 0

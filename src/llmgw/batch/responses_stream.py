"""A chat completion's stream as the Responses API's event sequence.

response.created and response.in_progress open it; the first text delta adds the
message item and its output_text part, each delta is a response.output_text.delta; a
tool call adds a function_call item whose arguments arrive as
response.function_call_arguments.delta; at the end every item is closed (text done,
part done, item done) in output order and response.completed (or response.incomplete)
carries the whole response. Pure: chunks in, events out; `encode` writes one event as
server-sent events frame it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import orjson

from llmgw.batch.responses_request import Ids, Item, ResponseRequest
from llmgw.batch.responses_translate import call_item, message_item, outcome, response_object, usage_of

Event = dict[str, Any]


def encode(event: Event) -> bytes:
    kind: str = event["type"]
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


@dataclass
class _Open:
    """An output item being written: its index in `output` and what has arrived."""

    index: int
    item: Item
    text: list[str] = field(default_factory=list)


class StreamTranslator:
    """Turns one chat stream into Responses events; `response` is the final object."""

    def __init__(self, request: ResponseRequest, response_id: str, created_at: int, ids: Ids) -> None:
        self._request = request
        self._id = response_id
        self._created_at = created_at
        self._ids = ids
        self._seq = 0
        self._output: list[Item] = []
        self._message: _Open | None = None
        self._calls: dict[int, _Open] = {}
        self._finish: Any = None
        self._usage: Item | None = None
        self.response: dict[str, Any] | None = None

    def _event(self, kind: str, **fields: Any) -> Event:
        event = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return event

    def _snapshot(self, status: str, **extra: Any) -> dict[str, Any]:
        return response_object(
            self._request,
            self._id,
            self._created_at,
            status=status,
            output=copy.deepcopy(self._output),
            **extra,
        )

    def start(self) -> list[Event]:
        return [
            self._event("response.created", response=self._snapshot("in_progress")),
            self._event("response.in_progress", response=self._snapshot("in_progress")),
        ]

    def feed(self, chunk: dict[str, Any]) -> list[Event]:
        """The events one chat chunk makes."""
        events: list[Event] = []
        usage = usage_of(chunk.get("usage"))
        if usage is not None:
            self._usage = usage
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if isinstance(text, str) and text:
                events += self._text(text)
            for call in delta.get("tool_calls") or []:
                events += self._call(call)
            if choice.get("finish_reason") is not None:
                self._finish = choice["finish_reason"]
        return events

    def _text(self, text: str) -> list[Event]:
        events: list[Event] = []
        opened = self._message
        if opened is None:
            item = message_item(self._ids("msg"), "", status="in_progress")
            item["content"] = []
            opened = self._message = _Open(len(self._output), item)
            self._output.append(item)
            events.append(
                self._event("response.output_item.added", output_index=opened.index, item=copy.deepcopy(item))
            )
            events.append(
                self._event(
                    "response.content_part.added",
                    item_id=item["id"],
                    output_index=opened.index,
                    content_index=0,
                    part={"type": "output_text", "text": "", "annotations": [], "logprobs": []},
                )
            )
        opened.text.append(text)
        events.append(
            self._event(
                "response.output_text.delta",
                item_id=opened.item["id"],
                output_index=opened.index,
                content_index=0,
                delta=text,
                logprobs=[],
            )
        )
        return events

    def _call(self, call: Any) -> list[Event]:
        if not isinstance(call, dict):
            return []
        events: list[Event] = []
        index = call.get("index", 0)
        function = call.get("function") or {}
        opened = self._calls.get(index)
        if opened is None:
            item = call_item(
                self._ids("fc"),
                call.get("id") or self._ids("call"),
                function.get("name") or "",
                "",
                "in_progress",
            )
            opened = self._calls[index] = _Open(len(self._output), item)
            self._output.append(item)
            events.append(
                self._event("response.output_item.added", output_index=opened.index, item=copy.deepcopy(item))
            )
        elif function.get("name"):
            opened.item["name"] += function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            opened.text.append(arguments)
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=opened.item["id"],
                    output_index=opened.index,
                    delta=arguments,
                )
            )
        return events

    def finish(self) -> list[Event]:
        """Closes every item and the response."""
        events: list[Event] = []
        closing = sorted(
            [*([self._message] if self._message else []), *self._calls.values()], key=lambda o: o.index
        )
        for opened in closing:
            item = opened.item
            joined = "".join(opened.text)
            if item["type"] == "message":
                part = {"type": "output_text", "text": joined, "annotations": [], "logprobs": []}
                item["content"] = [part]
                common = {"item_id": item["id"], "output_index": opened.index, "content_index": 0}
                events.append(self._event("response.output_text.done", text=joined, logprobs=[], **common))
                events.append(self._event("response.content_part.done", part=copy.deepcopy(part), **common))
            else:
                item["arguments"] = joined
                events.append(
                    self._event(
                        "response.function_call_arguments.done",
                        item_id=item["id"],
                        output_index=opened.index,
                        arguments=joined,
                    )
                )
            item["status"] = "completed"
            events.append(
                self._event("response.output_item.done", output_index=opened.index, item=copy.deepcopy(item))
            )
        status, incomplete = outcome(self._finish)
        self.response = self._snapshot(status, usage=self._usage, incomplete=incomplete)
        kind = "response.completed" if status == "completed" else "response.incomplete"
        events.append(self._event(kind, response=self.response))
        return events

    def fail(self, message: str) -> list[Event]:
        """The stream broke off: the response failed, with what had arrived."""
        error = {"code": "server_error", "message": message}
        return [self._event("response.failed", response=self._snapshot("failed", error=error))]

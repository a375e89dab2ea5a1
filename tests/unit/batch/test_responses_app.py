"""The Responses application in process, over a stand-in for the client port's chat
route: what it sends to the chat route, how a refusal or a broken stream comes back, and
what a gateway that keeps nothing (auth off, no `threads.store`) answers."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from llmgw.batch.responses_app import ResponsesApp
from llmgw.batch.responses_context import Context
from llmgw.http.rsgi import HTTPProtocol, Scope


class _Headers:
    def __init__(self, values: dict[str, str]) -> None:
        self._values = values

    def get(self, name: str, /) -> str | None:
        return self._values.get(name.lower())


class _Scope:
    proto = "http"

    def __init__(self, method: str, path: str, query: str = "") -> None:
        self.method, self.path, self.query_string = method, path, query
        self.headers = _Headers({"authorization": "Bearer k", "x-llmgw-tags": "team=a"})


class _Client:
    """The client's side of one request: its body and what was answered."""

    def __init__(self, body: Any = None) -> None:
        self.body = b"" if body is None else orjson.dumps(body)
        self.status = 0
        self.headers: dict[str, str] = {}
        self.sent: list[bytes] = []

    async def __call__(self) -> bytes:
        return self.body

    def __aiter__(self) -> Any:
        async def once() -> Any:
            yield self.body

        return once()

    def response_bytes(self, status: int, headers: list[tuple[str, str]], body: bytes, /) -> None:
        self.status, self.headers = status, dict(headers)
        self.sent.append(body)

    def response_stream(self, status: int, headers: list[tuple[str, str]], first: bytes = b"", /) -> Any:
        self.status, self.headers = status, dict(headers)
        self.sent.append(first)
        return self

    async def send_bytes(self, data: bytes, /) -> None:
        self.sent.append(data)

    async def client_disconnect(self) -> None:
        await asyncio.Event().wait()

    def json(self) -> Any:
        return orjson.loads(b"".join(self.sent))

    def events(self) -> list[dict[str, Any]]:
        text = b"".join(self.sent).decode()
        return [orjson.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


class _Chat:
    """The chat route: records what it was sent, answers what the test set."""

    def __init__(self, status: int = 200, body: Any = None, stream: list[bytes] | None = None) -> None:
        self.answer = (status, body, stream)
        self.seen: list[tuple[str, dict[str, Any], str | None]] = []

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        self.seen.append((scope.path, orjson.loads(await proto()), scope.headers.get("x-llmgw-tags")))
        status, body, stream = self.answer
        if stream is None:
            headers = [("content-type", "application/json"), ("retry-after", "3"), ("x-request-id", "inner")]
            proto.response_bytes(status, headers, orjson.dumps(body))
            return
        transport = proto.response_stream(status, [("content-type", "text/event-stream")])
        for piece in stream:
            await transport.send_bytes(piece)


def _app(chat: _Chat) -> ResponsesApp:
    app = ResponsesApp(Context(None, 3600.0, clock=lambda: 1_800_000_000.0), 1 << 20)
    app.chat = chat
    return app


def _run(app: ResponsesApp, scope: _Scope, client: _Client) -> _Client:
    asyncio.run(app(scope, client))
    return client


ANSWER = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1}}


def test_a_response_is_a_chat_completion_with_the_clients_headers() -> None:
    chat = _Chat(body=ANSWER)
    client = _run(_app(chat), _Scope("POST", "/v1/responses"), _Client({"model": "m", "input": "yo"}))
    assert client.status == 200
    answer = client.json()
    assert answer["output"][0]["content"][0]["text"] == "hi"
    assert answer["store"] is False  # nothing can be kept on this gateway, and it says so
    [(path, body, tags)] = chat.seen
    assert path == "/v1/chat/completions"
    assert body["messages"] == [{"role": "user", "content": "yo"}]
    assert tags == "team=a"


def test_a_refusal_of_the_chat_request_is_passed_on_as_it_was_made() -> None:
    refusal = {"error": {"message": "slow down", "type": "rate_limit_error", "param": None, "code": "x"}}
    client = _run(
        _app(_Chat(429, refusal)), _Scope("POST", "/v1/responses"), _Client({"model": "m", "input": "yo"})
    )
    assert client.status == 429
    assert client.json() == refusal
    assert client.headers["retry-after"] == "3"
    assert "x-request-id" not in client.headers  # the mount adds the outer request's own


def test_a_stream_broken_off_by_the_gateway_ends_failed() -> None:
    pieces = [
        b'data: {"choices":[{"index":0,"delta":{"content":"par"},"finish_reason":null}]}\n\n',
        b'data: {"error":{"message":"the answer was cut off: reset","type":"upstream_error"}}\n\n',
    ]
    client = _Client({"model": "m", "input": "yo", "stream": True})
    _run(_app(_Chat(stream=pieces)), _Scope("POST", "/v1/responses"), client)
    kinds = [event["type"] for event in client.events()]
    assert kinds[-2:] == ["response.output_text.delta", "response.failed"]
    assert client.events()[-1]["response"]["error"]["message"] == "the answer was cut off: reset"


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/v1/conversations", {}, 400),
        ("POST", "/v1/responses", {"model": "m", "input": "x", "previous_response_id": "resp_1"}, 400),
        ("POST", "/v1/responses", {"model": "m", "input": "x", "conversation": "conv_1"}, 400),
        ("GET", "/v1/responses/resp_1", None, 404),
    ],
)
def test_without_a_store_what_needs_one_is_refused(method: str, path: str, body: Any, status: int) -> None:
    chat = _Chat(body=ANSWER)
    client = _run(_app(chat), _Scope(method, path), _Client(body))
    assert client.status == status
    error = client.json()["error"]
    if status == 400:
        assert error["code"] == "store_not_configured"
        assert "threads.store" in error["message"]
    assert chat.seen == []


def test_a_stream_that_ends_without_its_last_event_ends_failed() -> None:
    cut = [b'data: {"choices":[{"index":0,"delta":{"content":"par"},"finish_reason":null}]}\n\n']
    whole = [
        *cut,
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    ends = []
    for pieces in (cut, whole):
        client = _Client({"model": "m", "input": "yo", "stream": True})
        _run(_app(_Chat(stream=pieces)), _Scope("POST", "/v1/responses"), client)
        ends.append(client.events()[-1]["type"])
    assert ends == ["response.failed", "response.completed"]

"""Streams as servers really frame them, through a real `llmgw server` process, read with
the official OpenAI SDK. The replica is a stand-in on loopback that speaks OpenAI chat
streaming the way sse-starlette does (CRLF line endings, JSON with a space after `:`
and `,`), or with CR line endings, or LF with spaces; it writes each event in pieces cut
right after a CR, so a CRLF reaches the gateway in two reads. Also a replica that
answers a streaming request with a JSON or plain-text body instead of a stream.

What must hold: the stream arrives whole (no error event, the gateway counts no
interruption); the usage chunk the gateway asked for on the client's behalf is taken out
when the client did not ask for it, and passed on when it did; the tokens it carries are
counted in every framing, and with auth on they reach the usage record."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from llmgw.testing.server import GatewayProcess, running_gateway
from support.clients import ClientFactory

PIECES = ["Hello", ",", " world", "!"]
PROMPT_TOKENS, COMPLETION_TOKENS = 7, len(PIECES)
# model name: (line ending, JSON separators)
FRAMINGS: dict[str, tuple[bytes, tuple[str, str]]] = {
    "crlf": (b"\r\n", (", ", ": ")),  # sse-starlette's default
    "cr": (b"\r", (", ", ": ")),
    "spaced": (b"\n", (", ", ": ")),  # "choices": [] with a space, LF
}
NOT_STREAMS = {"json": "application/json", "text": "text/plain; charset=utf-8"}
MODELS = [*FRAMINGS, *NOT_STREAMS]
WAIT_S = 15.0


def chunks(model: str, with_usage: bool) -> list[dict[str, Any]]:
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model}
    out = [
        {
            **head,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
        }
    ]
    out += [
        {**head, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in PIECES
    ]
    out.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if with_usage:
        usage = {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": COMPLETION_TOKENS,
            "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
        }
        out.append({**head, "choices": [], "usage": usage})
    return out


class Replica(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Replica
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        self.server.bodies.append(body)
        model = body["model"]
        if model in NOT_STREAMS:
            answer = json.dumps({"error": {"message": "streaming is not supported"}}).encode()
            if model == "text":
                answer = b"streaming is not supported\n"
            self._whole(NOT_STREAMS[model], answer)
            return
        end, separators = FRAMINGS[model]
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        events = [json.dumps(c, separators=separators).encode() for c in chunks(model, with_usage)]
        for data in [*events, b"[DONE]"]:
            event = b"data: " + data + end + end
            # Cut after each CR, so that a CRLF arrives in two pieces.
            for piece in event.replace(b"\r", b"\r\x00").split(b"\x00"):
                if piece:
                    self._chunk(piece)
        self.wfile.write(b"0\r\n\r\n")

    def do_GET(self) -> None:
        self._whole("application/json", b"{}", status=404)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()
        time.sleep(0.001)  # separate writes, so that they are mostly separate reads

    def _whole(self, content_type: str, body: bytes, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def replica() -> Iterator[Replica]:
    server = Replica()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _config(replica: Replica, **extra: Any) -> dict[str, Any]:
    return {
        "endpoints": [{"id": "stand-in", "url": replica.url, "models": MODELS}],
        "router": {"retries": 0},
        **extra,
    }


@pytest.fixture(scope="module")
def gateway(replica: Replica) -> Iterator[GatewayProcess]:
    with running_gateway(_config(replica)) as gateway:
        yield gateway


def _metric(gateway: GatewayProcess, prefix: str) -> float:
    for line in httpx.get(gateway.admin_url + "/metrics", timeout=5).text.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _stream(client: openai.OpenAI, model: str, **extra: Any) -> list[Any]:
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], stream=True, **extra
    )
    return list(stream)


@pytest.mark.parametrize("model", list(FRAMINGS))
def test_the_stream_arrives_whole_without_a_usage_chunk_nobody_asked_for(
    make_client: ClientFactory, gateway: GatewayProcess, replica: Replica, model: str
) -> None:
    tokens_before = _metric(gateway, f'llmgw_tokens_total{{kind="completion",model="{model}"}}')
    got = _stream(make_client(gateway), model)
    # The gateway asked the replica for usage on the client's behalf...
    assert replica.bodies[-1]["stream_options"] == {"include_usage": True}
    # ...and the client sees every chunk but that one, in order, and the stream's end.
    assert "".join(c.choices[0].delta.content or "" for c in got) == "".join(PIECES)
    assert [c.choices[0].finish_reason for c in got][-1] == "stop"
    assert all(c.choices and c.usage is None for c in got)
    assert len(got) == len(chunks(model, False))
    assert _metric(gateway, "llmgw_stream_interruptions_total") == 0
    chat = f'llmgw_requests_total{{model="{model}",reason="",route="/v1/chat/completions",status='
    assert _metric(gateway, chat + '"200"') >= 1  # the prefix names the family's labels right
    assert _metric(gateway, chat + '"502"') == 0
    # The usage it took out is what the tokens were counted from.
    deadline = time.monotonic() + WAIT_S
    key = f'llmgw_tokens_total{{kind="completion",model="{model}"}}'
    while _metric(gateway, key) < tokens_before + COMPLETION_TOKENS:
        assert time.monotonic() < deadline, "the stream's usage was never counted"
        time.sleep(0.05)
    assert _metric(gateway, key) == tokens_before + COMPLETION_TOKENS


@pytest.mark.parametrize("model", list(FRAMINGS))
def test_the_usage_chunk_reaches_a_client_that_asked_for_it(
    make_client: ClientFactory, gateway: GatewayProcess, model: str
) -> None:
    got = _stream(make_client(gateway), model, stream_options={"include_usage": True})
    assert "".join(c.choices[0].delta.content or "" for c in got if c.choices) == "".join(PIECES)
    last = got[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (PROMPT_TOKENS, COMPLETION_TOKENS)
    assert sum(1 for c in got if c.usage is not None) == 1


@pytest.mark.parametrize("model", list(NOT_STREAMS))
def test_a_body_that_is_not_a_stream_is_a_502_in_openais_shape(
    make_client: ClientFactory, gateway: GatewayProcess, model: str
) -> None:
    with pytest.raises(openai.APIStatusError) as raised:
        _stream(make_client(gateway), model)
    assert raised.value.status_code == 502
    answer = raised.value.response
    assert answer.headers["content-type"] == "application/json"
    # One JSON error and nothing else: no event glued onto the replica's body.
    assert answer.json() == {
        "error": {
            "message": f"model {model!r}: the replica did not answer with an event stream",
            "type": "upstream_error",
            "param": None,
            "code": "upstream_not_a_stream",
        }
    }
    interrupted = _metric(gateway, "llmgw_stream_interruptions_total")
    assert interrupted == 0


def test_with_auth_the_streams_tokens_reach_its_usage_record(replica: Replica, tmp_path: Path) -> None:
    config = _config(
        replica, auth={"enabled": True, "store": str(tmp_path / "llmgw.db"), "flush_interval": "100ms"}
    )
    with running_gateway(config) as gateway, httpx.Client(timeout=10) as admin:
        headers = {"authorization": f"Bearer {gateway.admin_token()}"}

        def call(path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
            answer = admin.request(
                "POST" if body else "GET", gateway.admin_url + path, json=body, headers=headers
            )
            assert answer.status_code < 300, answer.text
            data: dict[str, Any] = answer.json()
            return data

        call("/api/orgs", {"id": "o"})
        call("/api/teams", {"id": "t", "org": "o"})
        call("/api/projects", {"id": "p", "team": "t"})
        key = call("/api/keys", {"project": "p"})["key"]
        client = openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0, timeout=20)
        with client:
            request_ids = []
            for model in FRAMINGS:
                raw = client.chat.completions.with_raw_response.create(
                    model=model, messages=[{"role": "user", "content": "hi"}], stream=True
                )
                got = list(raw.parse())
                assert all(c.usage is None for c in got)
                request_ids.append(raw.headers["x-request-id"])
        deadline = time.monotonic() + WAIT_S
        while True:
            records = {r["request_id"]: r for r in call("/api/usage/records?limit=100&since=1h")["data"]}
            if all(rid in records for rid in request_ids):
                break
            assert time.monotonic() < deadline, "the usage records were never written"
            time.sleep(0.1)
        for rid, model in zip(request_ids, FRAMINGS, strict=True):
            record = records[rid]
            assert (record["model"], record["status"]) == (model, 200)
            assert (record["prompt_tokens"], record["completion_tokens"]) == (
                PROMPT_TOKENS,
                COMPLETION_TOKENS,
            )

"""Every fault mode over real sockets, set on the command line or switched at run time."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import aiohttp
import openai
import pytest
from sim_http_helpers import FAST, get_json, post_json

from llmgw.testing.sim import SimEngineProcess, http_status, start_sim_engine, wait_until_ready

CHAT: dict[str, Any] = {
    "model": "sim-model",
    "messages": [{"role": "user", "content": "hello"}],
    "max_tokens": 6,
}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimEngineProcess]:
    with start_sim_engine(*FAST) as handle:
        yield handle


@pytest.fixture
def clean(sim: SimEngineProcess) -> Iterator[SimEngineProcess]:
    """The module's sim with no fault, before and after the test."""
    post_json(sim.admin_url + "/sim/fault", {"mode": "none"})
    yield sim
    post_json(sim.admin_url + "/sim/fault", {"mode": "none"})


def client(sim: SimEngineProcess, timeout: float = 5.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.base_url, api_key="unused", max_retries=0, timeout=timeout)


def set_fault(sim: SimEngineProcess, **setting: Any) -> dict[str, Any]:
    return dict(post_json(sim.admin_url + "/sim/fault", setting))


@pytest.mark.parametrize(
    ("mode", "error", "status"),
    [
        ("500", openai.InternalServerError, 500),
        ("503", openai.InternalServerError, 503),
        ("429", openai.RateLimitError, 429),
    ],
)
def test_status_faults_answer_in_openai_shape_after_the_first_requests(
    clean: SimEngineProcess, mode: str, error: type[openai.APIStatusError], status: int
) -> None:
    assert set_fault(clean, mode=mode, after=1)["mode"] == mode
    api = client(clean)
    api.chat.completions.create(**CHAT)
    with pytest.raises(error) as caught:
        api.chat.completions.create(**CHAT)
    assert caught.value.status_code == status
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["code"] == status
    if status in (429, 503):
        assert caught.value.response.headers["retry-after"] == "1"


def test_hang_headers_sends_nothing_until_the_client_gives_up(clean: SimEngineProcess) -> None:
    set_fault(clean, mode="hang-headers")
    with pytest.raises(openai.APITimeoutError):
        client(clean, timeout=0.5).chat.completions.create(**CHAT)
    set_fault(clean, mode="none")
    assert get_json(clean.url + "/sim/state")["running"] == 0


async def read_stream(url: str, body: dict[str, Any], read_timeout: float) -> tuple[int, list[bytes], str]:
    """Events read before the stream ended, and how it ended: done, cut or timeout."""
    events: list[bytes] = []
    timeout = aiohttp.ClientTimeout(sock_read=read_timeout)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        try:
            async with session.post(url + "/v1/chat/completions", json=body) as response:
                async for line in response.content:
                    if line.startswith(b"data: "):
                        events.append(line)
                return response.status, events, "done"
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError):
            return 200, events, "cut"
        except TimeoutError:
            return 200, events, "timeout"


def test_hang_stream_sends_headers_and_tokens_then_silence(clean: SimEngineProcess) -> None:
    set_fault(clean, mode="hang-stream", stream_tokens=2)
    status, events, ending = asyncio.run(read_stream(clean.url, {**CHAT, "stream": True}, read_timeout=0.5))
    assert (status, ending) == (200, "timeout")
    assert len(events) == 3  # the role chunk and two tokens
    assert b"[DONE]" not in events[-1]


def test_cut_stream_closes_the_connection_mid_stream(clean: SimEngineProcess) -> None:
    set_fault(clean, mode="cut-stream", stream_tokens=1)
    status, events, ending = asyncio.run(read_stream(clean.url, {**CHAT, "stream": True}, read_timeout=5))
    assert (status, ending) == (200, "cut")
    assert len(events) == 2


def test_cut_stream_of_a_whole_answer_cuts_its_body(clean: SimEngineProcess) -> None:
    set_fault(clean, mode="cut-stream")
    with pytest.raises(openai.APIConnectionError):
        client(clean).chat.completions.create(**CHAT)


def test_refuse_closes_the_port_until_switched_back(clean: SimEngineProcess) -> None:
    set_fault(clean, mode="refuse")
    assert http_status(clean.url + "/health") is None
    with pytest.raises(openai.APIConnectionError):
        client(clean).chat.completions.create(**CHAT)
    assert get_json(clean.admin_url + "/sim/state")["listening"] is False
    set_fault(clean, mode="none")
    assert http_status(clean.url + "/health") == 200
    assert client(clean).chat.completions.create(**CHAT).usage is not None


def test_refuse_with_a_duration_reopens_by_itself(clean: SimEngineProcess) -> None:
    set_fault(clean, mode="refuse", duration_s=0.3)
    assert http_status(clean.url + "/health") is None
    wait_until_ready(clean.url, timeout=5)
    assert get_json(clean.url + "/sim/fault")["mode"] == "none"


def test_a_bad_fault_setting_is_refused_naming_the_field(clean: SimEngineProcess) -> None:
    for payload, field in (({"mode": "explode"}, "mode"), ({"mode": "500", "after": -1}, "after")):
        status, body = asyncio.run(post_raw(clean.admin_url + "/sim/fault", payload))
        assert status == 400
        assert body["error"]["message"].startswith(field)


async def post_raw(url: str, payload: object) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.post(url, json=payload) as response:
        return response.status, await response.json()


def test_startup_delay_answers_503_then_becomes_ready() -> None:
    with start_sim_engine(*FAST, "--startup-delay", "0.6", "--flavor", "llamacpp", wait_ready=False) as sim:
        assert http_status(sim.url + "/health") == 503
        with pytest.raises(openai.InternalServerError) as caught:
            client(sim).chat.completions.create(**CHAT)
        assert caught.value.status_code == 503
        wait_until_ready(sim.url, timeout=10)
        assert client(sim).chat.completions.create(**CHAT).usage is not None


def test_exit_after_serves_n_requests_then_exits() -> None:
    sim = start_sim_engine(*FAST, "--fault", "exit-after", "--fault-after", "2")
    try:
        api = client(sim)
        api.chat.completions.create(**CHAT)
        api.chat.completions.create(**CHAT)
        assert sim.wait_exit(timeout=10) == 3
        with pytest.raises(openai.APIConnectionError):
            api.chat.completions.create(**CHAT)
    finally:
        sim.stop()


def test_exit_after_zero_exits_on_the_next_request_while_it_is_in_flight() -> None:
    sim = start_sim_engine(*FAST)
    try:
        post_json(sim.admin_url + "/sim/fault", {"mode": "exit-after", "after": 0})
        with pytest.raises(openai.APIConnectionError):
            client(sim).chat.completions.create(**CHAT)
        assert sim.wait_exit(timeout=10) == 3
    finally:
        sim.stop()


def test_a_fault_set_on_the_command_line_applies_from_the_start() -> None:
    with start_sim_engine(*FAST, "--fault", "503", "--fault-after", "1") as sim:
        api = client(sim)
        api.chat.completions.create(**CHAT)
        with pytest.raises(openai.InternalServerError):
            api.chat.completions.create(**CHAT)
        assert get_json(sim.url + "/sim/fault") == {
            "mode": "503",
            "after": 1,
            "stream_tokens": 1,
            "duration_s": None,
        }


def test_refuse_from_the_start_is_reachable_only_on_the_admin_port() -> None:
    with start_sim_engine(*FAST, "--fault", "refuse", wait_ready=False) as sim:
        assert http_status(sim.url + "/health") is None
        assert get_json(sim.admin_url + "/sim/state")["listening"] is False
        post_json(sim.admin_url + "/sim/fault", {"mode": "none"})
        wait_until_ready(sim.url, timeout=5)

"""A sim replica's quality over real sockets: its error rate set on the command line,
both it and the TTFT factor changed at run time (`/sim/quality`)."""

from __future__ import annotations

import time
import urllib.error
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from sim_http_helpers import FAST, get_json, post_json

from llmgw.testing.sim import SimEngineProcess, start_sim_engine

CHAT: dict[str, Any] = {
    "model": "sim-model",
    "messages": [{"role": "user", "content": "hello"}],
    "max_tokens": 2,
}


@pytest.fixture
def failing() -> Iterator[SimEngineProcess]:
    with start_sim_engine(*FAST, "--error-rate", "0.2") as handle:
        yield handle


def _outcomes(sim: SimEngineProcess, n: int) -> list[int]:
    api = openai.OpenAI(base_url=sim.base_url, api_key="unused", max_retries=0, timeout=10)
    statuses = []
    for _ in range(n):
        try:
            api.chat.completions.create(**CHAT)
            statuses.append(200)
        except openai.APIStatusError as exc:
            statuses.append(exc.status_code)
    return statuses


def test_every_fifth_request_fails_and_the_rate_changes_at_run_time(failing: SimEngineProcess) -> None:
    assert get_json(failing.admin_url + "/sim/quality") == {"error_rate": 0.2, "ttft_factor": 1.0}
    assert _outcomes(failing, 10) == [200, 200, 200, 200, 500] * 2
    assert post_json(failing.admin_url + "/sim/quality", {"error_rate": 0}) == {
        "error_rate": 0.0,
        "ttft_factor": 1.0,
    }
    assert _outcomes(failing, 10) == [200] * 10
    assert get_json(failing.admin_url + "/sim/state")["quality"]["error_rate"] == 0.0


def test_the_ttft_factor_holds_the_answer_back() -> None:
    # One token, so the answer is the first token: its prefill (a few ms). Factor 3 holds
    # the request twice its prefill and a 300 ms decode step first, over 0.6 s in all.
    # Sleeps end no earlier than asked, so this lower bound cannot flake on a slow machine.
    with start_sim_engine("--decode-ms", "300") as sim:
        api = openai.OpenAI(base_url=sim.base_url, api_key="unused", max_retries=0, timeout=30)
        post_json(sim.admin_url + "/sim/quality", {"ttft_factor": 3})
        started = time.monotonic()
        api.chat.completions.create(**{**CHAT, "max_tokens": 1})
        assert time.monotonic() - started >= 0.6


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [({"error_rate": 2}, "error_rate: must be between 0 and 1"), ({"speed": 1}, "speed: unknown field")],
)
def test_a_bad_quality_is_refused_naming_the_field(
    failing: SimEngineProcess, payload: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        post_json(failing.admin_url + "/sim/quality", payload)
    assert caught.value.code == 400
    assert fragment in caught.value.read().decode()

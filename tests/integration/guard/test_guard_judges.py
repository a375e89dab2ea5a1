"""`model` checks through a real gateway: the judge (a sim in judge mode) asked through
the gateway's routing, its categories, and `on_error` when it hangs or answers
something its format cannot read. Judges stay out of /v1/models."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, set_fault, sim

Client = Callable[[GatewayProcess], openai.OpenAI]


def _judged(
    echo: SimEngineProcess, judge: SimEngineProcess, fmt: str, check: dict[str, Any]
) -> dict[str, Any]:
    return {
        "endpoints": [endpoint("echo", echo, "chat-model"), endpoint("judge", judge, "judge")],
        "models": [
            {"name": "chat-model"},
            {"name": "judge", "role": "guard", "guard": {"format": fmt}, "scaling": {"min": 1}},
        ],
        "guard": {
            "default": "judged",
            "policies": [{"name": "judged", "checks": [{"type": "model", "model": "judge", **check}]}],
        },
    }


@pytest.fixture(scope="module")
def llama_judge() -> Iterator[SimEngineProcess]:
    engine = sim("--model", "judge", "--judge", "llamaguard3", "--admin-port", "0")
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="module")
def qwen_judge() -> Iterator[SimEngineProcess]:
    engine = sim("--model", "judge", "--judge", "qwen3guard", "--admin-port", "0")
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="module")
def strict_gateway(echo_sim: SimEngineProcess, llama_judge: SimEngineProcess) -> Iterator[GatewayProcess]:
    check = {"stage": "both", "action": "block", "categories": ["S1", "S9"], "timeout": "1s"}
    handle = start_gateway(_judged(echo_sim, llama_judge, "llamaguard3", check), timeout=60)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def lenient_gateway(echo_sim: SimEngineProcess, qwen_judge: SimEngineProcess) -> Iterator[GatewayProcess]:
    check = {"stage": "input", "action": "block", "on_error": "allow", "timeout": "1s"}
    handle = start_gateway(_judged(echo_sim, qwen_judge, "qwen3guard", check), timeout=60)
    try:
        yield handle
    finally:
        handle.stop()


def _ask(client: openai.OpenAI, text: str) -> str:
    answer = client.chat.completions.create(model="chat-model", messages=[{"role": "user", "content": text}])
    return str(answer.choices[0].message.content)


def _refused(client: openai.OpenAI, text: str) -> dict[str, Any]:
    with pytest.raises(openai.BadRequestError) as caught:
        _ask(client, text)
    body = caught.value.body
    assert isinstance(body, dict)
    return body


def test_safe_text_passes_and_unsafe_is_blocked(client_for: Client, strict_gateway: GatewayProcess) -> None:
    client = client_for(strict_gateway)
    assert _ask(client, "a kind question") == "a kind question"
    body = _refused(client, "a question [[unsafe:S9]]")
    assert body["code"] == "content_filter"
    assert "'judged'" in body["message"]
    assert "model" in body["message"]


def test_categories_narrow_what_blocks(client_for: Client, strict_gateway: GatewayProcess) -> None:
    assert _ask(client_for(strict_gateway), "odd [[unsafe:S5]]") == "odd [[unsafe:S5]]"


def test_unreadable_answer_blocks_by_default(client_for: Client, strict_gateway: GatewayProcess) -> None:
    assert _refused(client_for(strict_gateway), "[[garbage]]")["code"] == "content_filter"


def test_hanging_judge_blocks_by_default(
    client_for: Client, strict_gateway: GatewayProcess, llama_judge: SimEngineProcess
) -> None:
    set_fault(llama_judge, "hang-headers")
    try:
        assert _refused(client_for(strict_gateway), "anything")["code"] == "content_filter"
    finally:
        set_fault(llama_judge, "none")


def test_on_error_allow_lets_text_through(
    client_for: Client, lenient_gateway: GatewayProcess, qwen_judge: SimEngineProcess
) -> None:
    client = client_for(lenient_gateway)
    assert _ask(client, "[[garbage]] fine") == "[[garbage]] fine"
    set_fault(qwen_judge, "hang-headers")
    try:
        assert _ask(client, "still fine") == "still fine"
    finally:
        set_fault(qwen_judge, "none")
    assert _refused(client, "bad [[unsafe]]")["code"] == "content_filter"
    text = httpx.get(lenient_gateway.admin_url + "/metrics", timeout=5).text
    assert (
        'llmgw_guard_checks_total{action="block",check="model",policy="judged",stage="input",verdict="error"}'
        in text
    )
    assert "llmgw_guard_judge_seconds_bucket" in text


def test_judges_stay_hidden(client_for: Client, strict_gateway: GatewayProcess) -> None:
    client = client_for(strict_gateway)
    assert [m.id for m in client.models.list().data] == ["chat-model"]
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="judge", messages=[{"role": "user", "content": "hi"}])

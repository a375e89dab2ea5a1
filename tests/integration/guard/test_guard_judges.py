"""`model` checks through a real gateway: the judge (a sim in judge mode) asked through
the gateway's routing, its categories (a check's and the judge model's own), streamed
answers judged, and `on_error` when it hangs, fails or answers something its format
cannot read. Judges stay out of /v1/models."""

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


@pytest.fixture(scope="module")
def answer_gateway(echo_sim: SimEngineProcess, llama_judge: SimEngineProcess) -> Iterator[GatewayProcess]:
    """Judges answers only, with a judge whose own categories (the catalog's) are S1."""
    config = _judged(
        echo_sim, llama_judge, "llamaguard3", {"stage": "output", "action": "block", "timeout": "2s"}
    )
    config["models"][1]["guard"]["categories"] = ["S1"]
    handle = start_gateway(config, timeout=60)
    try:
        yield handle
    finally:
        handle.stop()


def test_the_judge_models_own_categories_narrow_what_counts(
    client_for: Client, answer_gateway: GatewayProcess
) -> None:
    client = client_for(answer_gateway)
    # S5 is unsafe to the judge but not among its catalog categories: the answer goes.
    assert _ask(client, "odd [[unsafe:S5]]") == "odd [[unsafe:S5]]"
    body = _refused(client, "bad [[unsafe:S1]]")
    assert body["code"] == "content_filter"
    assert "answer" in body["message"]


def _read(client: openai.OpenAI, text: str, parts: list[str], reasons: list[str | None]) -> None:
    stream = client.chat.completions.create(
        model="chat-model", messages=[{"role": "user", "content": text}], stream=True, max_tokens=400
    )
    for chunk in stream:
        for choice in chunk.choices:
            parts.append(choice.delta.content or "")
            reasons.append(choice.finish_reason)


def _stream(client: openai.OpenAI, text: str) -> tuple[str, list[str | None]]:
    parts: list[str] = []
    reasons: list[str | None] = []
    _read(client, text, parts, reasons)
    return "".join(parts), reasons


def _stream_blocked(client: openai.OpenAI, text: str) -> tuple[str, list[str | None]]:
    """What a stream the guard ended released, and its finish reasons."""
    parts: list[str] = []
    reasons: list[str | None] = []
    with pytest.raises(openai.APIError) as caught:
        _read(client, text, parts, reasons)
    assert "content_filter" in str(caught.value.body) or "guard policy" in caught.value.message
    return "".join(parts), reasons


def test_a_streamed_answer_is_judged(client_for: Client, answer_gateway: GatewayProcess) -> None:
    client = client_for(answer_gateway)
    safe = "word " * 100
    text, reasons = _stream(client, safe)
    assert text == safe
    assert reasons[-1] == "stop"
    # Unsafe from the start: the judge is asked before any text goes, and nothing does.
    text, reasons = _stream_blocked(client, "[[unsafe:S1]] " + "word " * 60)
    assert text == ""
    assert reasons[-1] == "content_filter"
    metrics = httpx.get(answer_gateway.admin_url + "/metrics", timeout=5).text
    assert (
        'llmgw_guard_checks_total{action="block",check="model",policy="judged",stage="output",verdict="hit"}'
        in metrics
    )


def test_a_judge_failing_mid_stream_ends_it_keeping_what_was_released(
    client_for: Client, answer_gateway: GatewayProcess, llama_judge: SimEngineProcess
) -> None:
    # The judge answers its first question (before the first text goes), then fails:
    # on_error block stops the stream at the next judging point (a later one, or the end).
    lead = "word " * 400  # 2000 characters, 250 tokens of the echo: seconds of generation
    set_fault(llama_judge, "500", after=1)
    try:
        text, reasons = _stream_blocked(client_for(answer_gateway), lead)
    finally:
        set_fault(llama_judge, "none")
    assert text, "nothing was released before the block"
    assert lead.startswith(text)
    assert len(text) < len(lead)
    assert reasons[-1] == "content_filter"

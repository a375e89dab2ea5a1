"""pii, secrets and regex checks through a real gateway and the `openai` SDK: block,
redact and flag at the input and output stages, on chat, completions, embeddings and
streams. The sim echoes the last user message, so what the engine received and what
the client is answered are both visible."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import SimEngineProcess
from support.guard import guard_checks, guarded_config

Client = Callable[[GatewayProcess], openai.OpenAI]
KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
CARD = "4111 1111 1111 1111"


@pytest.fixture(scope="module")
def input_gateway(echo_sim: SimEngineProcess) -> Iterator[GatewayProcess]:
    checks: list[dict[str, Any]] = [
        {"type": "secrets", "stage": "input", "action": "block"},
        {"type": "pii", "stage": "input", "action": "redact"},
        {"type": "regex", "stage": "input", "action": "flag", "patterns": ["(?i)project zeus"]},
    ]
    handle = start_gateway(guarded_config(echo_sim, checks), timeout=60)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def output_gateway(echo_sim: SimEngineProcess) -> Iterator[GatewayProcess]:
    checks = [
        {"type": "secrets", "stage": "output", "action": "block"},
        {"type": "pii", "stage": "output", "action": "redact"},
    ]
    handle = start_gateway(guarded_config(echo_sim, checks), timeout=60)
    try:
        yield handle
    finally:
        handle.stop()


def _chat(client: openai.OpenAI, text: str, **extra: object) -> str:
    answer = client.chat.completions.create(
        model="chat-model",
        messages=[{"role": "user", "content": text}],
        **extra,  # type: ignore[call-overload]
    )
    return str(answer.choices[0].message.content)


def test_input_block_is_a_400_naming_policy_and_check_not_the_secret(
    client_for: Client, input_gateway: GatewayProcess
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _chat(client_for(input_gateway), f"here is my key {KEY} please keep it")
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "content_filter"
    assert "'p'" in error["message"]
    assert "secrets" in error["message"]
    assert KEY not in str(caught.value)
    assert KEY[:12] not in error["message"]


def test_input_redact_rewrites_what_the_engine_receives(
    client_for: Client, input_gateway: GatewayProcess
) -> None:
    echoed = _chat(client_for(input_gateway), f"mail bob@example.com, card {CARD}, thanks")
    assert echoed == "mail [EMAIL], card [CARD], thanks"


def test_input_clean_text_passes_untouched(client_for: Client, input_gateway: GatewayProcess) -> None:
    text = "an order of 16 items, 4111 1111 1111 1112 is not a card number"
    assert _chat(client_for(input_gateway), text) == text


def test_input_flag_lets_it_through_and_counts_it(client_for: Client, input_gateway: GatewayProcess) -> None:
    before = guard_checks(input_gateway).get(("p", "regex", "input", "flag", "hit"), 0)
    assert _chat(client_for(input_gateway), "status of Project Zeus?") == "status of Project Zeus?"
    after = guard_checks(input_gateway)
    assert after[("p", "regex", "input", "flag", "hit")] == before + 1
    assert after[("p", "secrets", "input", "block", "clean")] >= 1


def test_input_covers_completions_prompt_and_embeddings_input(
    client_for: Client, input_gateway: GatewayProcess
) -> None:
    client = client_for(input_gateway)
    completion = client.completions.create(model="chat-model", prompt="write to ann@example.org")
    assert completion.choices[0].text == "write to [EMAIL]"
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model="chat-model", input=["fine", f"token {KEY}"])
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["code"] == "content_filter"


def test_input_covers_tool_call_arguments(client_for: Client, input_gateway: GatewayProcess) -> None:
    messages = [
        {"role": "user", "content": "call it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "login", "arguments": f'{{"api_key": "{KEY}"}}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "user", "content": "done?"},
    ]
    with pytest.raises(openai.BadRequestError):
        client_for(input_gateway).chat.completions.create(model="chat-model", messages=messages)  # type: ignore[arg-type]


def test_input_stage_does_not_touch_answers(client_for: Client, output_gateway: GatewayProcess) -> None:
    # The output gateway checks answers only: its engine receives the address as sent,
    # and the answer (the echo) is what gets redacted.
    assert _chat(client_for(output_gateway), "mail bob@example.com now") == "mail [EMAIL] now"


def test_output_block_before_any_byte_is_a_400(client_for: Client, output_gateway: GatewayProcess) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _chat(client_for(output_gateway), f"say {KEY}")
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["code"] == "content_filter"
    assert "answer" in caught.value.body["message"]


def test_output_redact_on_completions(client_for: Client, output_gateway: GatewayProcess) -> None:
    completion = client_for(output_gateway).completions.create(model="chat-model", prompt=f"card {CARD}.")
    assert completion.choices[0].text == "card [CARD]."


def _stream_text(client: openai.OpenAI, text: str) -> tuple[str, list[str | None]]:
    stream = client.chat.completions.create(
        model="chat-model", messages=[{"role": "user", "content": text}], stream=True
    )
    parts: list[str] = []
    reasons: list[str | None] = []
    for chunk in stream:
        for choice in chunk.choices:
            parts.append(choice.delta.content or "")
            reasons.append(choice.finish_reason)
    return "".join(parts), reasons


def test_stream_redacts_a_match_split_across_events(
    client_for: Client, output_gateway: GatewayProcess
) -> None:
    # The echo is sent 8 characters an event: the address spans three events.
    text, reasons = _stream_text(client_for(output_gateway), "write to someone.long@example.com today")
    assert text == "write to [EMAIL] today"
    assert reasons[-1] == "stop"


def test_stream_block_after_first_byte_ends_with_content_filter(
    client_for: Client, output_gateway: GatewayProcess
) -> None:
    lead = "word " * 80  # past the hold-back, so the stream has begun when the key arrives
    stream = client_for(output_gateway).chat.completions.create(
        model="chat-model",
        messages=[{"role": "user", "content": lead + KEY + " and more text after"}],
        stream=True,
    )
    parts: list[str] = []
    reasons: list[str | None] = []

    def read_all() -> None:
        for chunk in stream:
            for choice in chunk.choices:
                parts.append(choice.delta.content or "")
                reasons.append(choice.finish_reason)

    with pytest.raises(openai.APIError) as caught:
        read_all()
    text = "".join(parts)
    assert text, "nothing was released before the block"
    assert lead.startswith(text)
    assert "sk-proj" not in text
    assert "after" not in text
    assert reasons[-1] == "content_filter"
    assert "content_filter" in str(caught.value.body) or "guard policy" in caught.value.message

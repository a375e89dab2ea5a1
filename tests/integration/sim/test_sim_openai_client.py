"""The official openai client (sync, async, streaming) against a sim over real sockets."""

from __future__ import annotations

import asyncio
import base64
import struct

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from sim_http_helpers import get_json, post_json

from llmgw.testing.sim import SimEngineProcess

MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Name three colours, please."},
]


@pytest.fixture
def client(vllm_sim: SimEngineProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=vllm_sim.base_url, api_key="unused", max_retries=0, timeout=10)


@pytest.fixture
def prompt_tokens(vllm_sim: SimEngineProcess) -> int:
    answer = post_json(vllm_sim.url + "/tokenize", {"model": "sim-model", "messages": MESSAGES})
    assert answer["count"] == len(answer["tokens"])
    return int(answer["count"])


def test_chat_answers_with_exact_usage_and_max_tokens(client: openai.OpenAI, prompt_tokens: int) -> None:
    reply = client.chat.completions.create(model="sim-model", messages=MESSAGES, max_tokens=12)
    assert reply.object == "chat.completion"
    assert reply.choices[0].finish_reason == "length"
    assert reply.choices[0].message.role == "assistant"
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == prompt_tokens
    assert reply.usage.completion_tokens == 12
    assert reply.usage.total_tokens == prompt_tokens + 12


def test_without_max_tokens_the_default_length_ends_with_stop(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(model="alias", messages=MESSAGES)
    assert reply.model == "alias"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 128


def test_the_same_seed_gives_the_same_answer(client: openai.OpenAI) -> None:
    def ask(seed: int) -> str | None:
        reply = client.chat.completions.create(model="sim-model", messages=MESSAGES, max_tokens=10, seed=seed)
        return reply.choices[0].message.content

    assert ask(1) == ask(1)
    assert ask(1) != ask(2)


def test_a_stop_string_ends_the_answer_before_it(client: openai.OpenAI) -> None:
    full = client.chat.completions.create(model="sim-model", messages=MESSAGES, max_tokens=30, seed=4)
    text = full.choices[0].message.content or ""
    stop = text.split()[5]
    cut = client.chat.completions.create(
        model="sim-model", messages=MESSAGES, max_tokens=30, seed=4, stop=[stop]
    )
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == text[: text.index(stop)]
    assert cut.usage is not None
    assert cut.usage.completion_tokens < 30


def test_streaming_chat_with_include_usage_matches_vllm(client: openai.OpenAI, prompt_tokens: int) -> None:
    stream = client.chat.completions.create(
        model="sim-model",
        messages=MESSAGES,
        max_tokens=8,
        stream=True,
        stream_options={"include_usage": True},
        seed=9,
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.usage is None for c in chunks[:-1])
    assert [c.choices[0].finish_reason for c in chunks[1:-1]] == [None] * 7 + ["length"]
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (prompt_tokens, 8)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks[:-1])
    whole = client.chat.completions.create(model="sim-model", messages=MESSAGES, max_tokens=8, seed=9)
    assert streamed == whole.choices[0].message.content
    assert len({c.id for c in chunks}) == 1


def test_async_client_chat_and_completions(vllm_sim: SimEngineProcess) -> None:
    async def main() -> None:
        async with openai.AsyncOpenAI(base_url=vllm_sim.base_url, api_key="unused", max_retries=0) as client:
            chat, text = await asyncio.gather(
                client.chat.completions.create(model="sim-model", messages=MESSAGES, max_tokens=5),
                client.completions.create(model="sim-model", prompt="Once upon a time", max_tokens=6),
            )
            assert chat.usage is not None
            assert chat.usage.completion_tokens == 5
            assert text.object == "text_completion"
            assert text.usage is not None
            assert (text.usage.prompt_tokens, text.usage.completion_tokens) == (4, 6)
            pieces = []
            stream = await client.completions.create(
                model="sim-model", prompt=[11, 12, 13], max_tokens=4, stream=True
            )
            async for chunk in stream:
                pieces.append(chunk.choices[0].text)
                last_reason = chunk.choices[0].finish_reason
            assert len(pieces) == 4
            assert last_reason == "length"

    asyncio.run(main())


def test_embeddings_are_deterministic_in_float_and_base64(client: openai.OpenAI) -> None:
    first = client.embeddings.create(model="sim-model", input=["hello world", "other text"])
    again = client.embeddings.create(model="sim-model", input="hello world", encoding_format="float")
    assert len(first.data) == 2
    assert len(first.data[0].embedding) == 64
    assert first.data[0].embedding == pytest.approx(again.data[0].embedding, abs=1e-6)
    assert first.data[0].embedding != first.data[1].embedding
    assert first.usage.prompt_tokens == 4
    raw = client.embeddings.with_raw_response.create(
        model="sim-model", input="hello world", encoding_format="base64"
    )
    packed = base64.b64decode(str(raw.parse().data[0].embedding))  # base64: a str, typed as floats
    assert list(struct.unpack("<64f", packed)) == pytest.approx(again.data[0].embedding, abs=1e-6)


def test_models_lists_names_and_adapters_with_their_parent(client: openai.OpenAI) -> None:
    models = {m.id: m for m in client.models.list()}
    assert set(models) == {"sim-model", "alias", "sql-lora"}
    assert models["sql-lora"].model_extra is not None
    assert models["sql-lora"].model_extra["parent"] == "sim-model"
    assert models["sim-model"].model_extra is not None
    assert models["sim-model"].model_extra["max_model_len"] == 8192


def test_an_adapter_is_served_by_name(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(model="sql-lora", messages=MESSAGES, max_tokens=3)
    assert reply.model == "sql-lora"


def test_errors_come_in_openai_shape_with_the_right_status(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="nope", messages=MESSAGES, max_tokens=3)
    assert missing.value.status_code == 404
    with pytest.raises(openai.BadRequestError, match="maximum context length is 8192"):
        client.chat.completions.create(model="sim-model", messages=MESSAGES, max_tokens=9000)
    with pytest.raises(openai.BadRequestError, match="n="):
        client.chat.completions.create(model="sim-model", messages=MESSAGES, max_tokens=3, n=2)


def test_cached_tokens_are_reported_when_prompt_details_are_on(vllm_sim: SimEngineProcess) -> None:
    long_system = {"role": "system", "content": "Rules: " + "be clear and kind. " * 40}
    messages = [long_system, {"role": "user", "content": "First question?"}]
    first = post_json(vllm_sim.url + "/v1/chat/completions", {"messages": messages, "max_tokens": 2})
    messages[1] = {"role": "user", "content": "Second question?"}
    second = post_json(vllm_sim.url + "/v1/chat/completions", {"messages": messages, "max_tokens": 2})
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached > 100
    assert cached % 16 == 0
    recent = get_json(vllm_sim.url + "/sim/requests?limit=1")["requests"]
    assert recent[0]["cached_tokens"] == cached

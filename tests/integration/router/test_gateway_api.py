"""The OpenAI API through `llmgw server` in front of two sim engines, with the
official `openai` client (sync, async, streaming) and raw HTTP for malformed input."""

from __future__ import annotations

import asyncio
import time

import httpx
import openai
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from llmgw.testing.server import GatewayProcess, start_gateway
from support.clients import ClientFactory
from support.sims import endpoint, sim

REPLICAS = {"sim-a", "sim-b"}


def test_models_lists_catalog_entries_with_metadata(
    make_client: ClientFactory, gateway: GatewayProcess
) -> None:
    models = make_client(gateway).models.list().data
    assert [m.id for m in models] == ["chat-model"]
    entry = models[0].model_dump()
    assert entry["aliases"] == ["chat"]
    assert entry["context_length"] == 2048
    assert entry["max_output"] == 256
    assert entry["capabilities"]["tools"] is True
    assert entry["simulated"] is True
    assert make_client(gateway).models.retrieve("chat").id == "chat-model"


def test_chat_completion_says_which_replica_answered(
    make_client: ClientFactory, gateway: GatewayProcess
) -> None:
    raw = make_client(gateway).chat.completions.with_raw_response.create(
        model="chat-model", messages=[{"role": "user", "content": "hello there"}], max_tokens=5
    )
    completion = raw.parse()
    assert completion.choices[0].message.content
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 5
    assert raw.headers["x-llmgw-replica"] in REPLICAS
    assert raw.headers["x-llmgw-model"] == "chat-model"
    assert raw.headers["x-request-id"]


def test_alias_is_served_as_the_model(make_client: ClientFactory, gateway: GatewayProcess) -> None:
    raw = make_client(gateway).chat.completions.with_raw_response.create(
        model="chat", messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    assert raw.headers["x-llmgw-model"] == "chat-model"
    assert raw.parse().model == "chat-model"


def test_adapter_is_sent_under_its_engine_name(make_client: ClientFactory, gateway: GatewayProcess) -> None:
    completion = make_client(gateway).chat.completions.create(
        model="chat-lora", messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    assert completion.model == "chat-lora"


def test_stream_without_usage_asked_gets_no_usage_chunk(
    make_client: ClientFactory, gateway: GatewayProcess
) -> None:
    chunks = list(
        make_client(gateway).chat.completions.create(
            model="chat-model",
            messages=[{"role": "user", "content": "stream please"}],
            max_tokens=6,
            stream=True,
        )
    )
    assert chunks, "the stream was empty"
    assert all(c.choices for c in chunks), "a usage-only chunk reached a client that did not ask for it"
    assert all(c.usage is None for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text.strip()
    assert chunks[-1].choices[0].finish_reason == "length"


def test_stream_with_usage_asked_gets_it_last(make_client: ClientFactory, gateway: GatewayProcess) -> None:
    chunks = list(
        make_client(gateway).chat.completions.create(
            model="chat-model",
            messages=[{"role": "user", "content": "count my tokens"}],
            max_tokens=4,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.completion_tokens == 4


def test_completions_and_embeddings(make_client: ClientFactory, gateway: GatewayProcess) -> None:
    c = make_client(gateway)
    completion = c.completions.create(model="chat-model", prompt="Once upon a time", max_tokens=4)
    assert completion.choices[0].text
    embedding = c.embeddings.create(model="chat-model", input=["a", "b"])
    assert len(embedding.data) == 2
    assert len(embedding.data[0].embedding) > 0


def test_async_client_concurrent_requests(gateway: GatewayProcess) -> None:
    async def run() -> set[str]:
        async with openai.AsyncOpenAI(base_url=gateway.base_url, api_key="x", max_retries=0) as c:
            raws = await asyncio.gather(
                *(
                    c.chat.completions.with_raw_response.create(
                        model="chat-model", messages=[{"role": "user", "content": f"n{i}"}], max_tokens=2
                    )
                    for i in range(16)
                )
            )
        return {r.headers["x-llmgw-replica"] for r in raws}

    assert asyncio.run(run()) <= REPLICAS


def test_unknown_model_is_404_naming_where_to_look(
    make_client: ClientFactory, gateway: GatewayProcess
) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        make_client(gateway).chat.completions.create(
            model="nope", messages=[{"role": "user", "content": "x"}]
        )
    body = caught.value.body
    assert isinstance(body, dict)
    assert "/v1/models" in body["message"]
    assert body["code"] == "model_not_found"


def test_max_tokens_above_max_output_is_400(make_client: ClientFactory, gateway: GatewayProcess) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        make_client(gateway).chat.completions.create(
            model="chat-model", messages=[{"role": "user", "content": "x"}], max_tokens=1000
        )
    assert "256" in str(caught.value)


def test_prompt_over_the_context_is_400_before_any_engine(
    make_client: ClientFactory, gateway: GatewayProcess
) -> None:
    long_prompt = "word " * 20_000  # well past 2048 tokens by any count
    with pytest.raises(openai.BadRequestError) as caught:
        make_client(gateway).chat.completions.create(
            model="chat-model", messages=[{"role": "user", "content": long_prompt}], max_tokens=10
        )
    assert "context" in str(caught.value)


def test_body_over_the_limit_is_413(gateway: GatewayProcess) -> None:
    body = b'{"model":"chat-model","messages":[{"role":"user","content":"' + b"x" * 300_000 + b'"}]}'
    response = httpx.post(gateway.base_url + "/chat/completions", content=body, timeout=10)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        (b'{"messages": [{"role": "user", "content": "x"}]}', "model"),
        (b'{"model": "chat-model"}', "messages"),
        (b'{"model": "chat-model", "messages": [], "stream": "yes"}', "stream"),
        (
            b'{"model": "chat-model", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}',
            "max_tokens",
        ),
    ],
)
def test_malformed_requests_are_400_in_openai_shape(
    gateway: GatewayProcess, body: bytes, param: str | None
) -> None:
    response = httpx.post(gateway.base_url + "/chat/completions", content=body, timeout=10)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"]
    assert error["param"] == param


def test_unknown_route_and_wrong_method(gateway: GatewayProcess) -> None:
    assert httpx.get(gateway.base_url + "/nothing", timeout=5).status_code == 404
    assert httpx.get(gateway.base_url + "/chat/completions", timeout=5).status_code == 405


def test_admin_health_readiness_and_metrics(make_client: ClientFactory, gateway: GatewayProcess) -> None:
    assert httpx.get(gateway.admin_url + "/healthz", timeout=5).status_code == 200
    assert httpx.get(gateway.admin_url + "/readyz", timeout=5).status_code == 200
    make_client(gateway).chat.completions.create(
        model="chat-model", messages=[{"role": "user", "content": "m"}], max_tokens=2
    )
    text = httpx.get(gateway.admin_url + "/metrics", timeout=5).text
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    names = {s.name for s in samples}
    ok = {"route": "/v1/chat/completions", "model": "chat-model", "status": "200", "reason": ""}
    assert any(s.name == "llmgw_requests_total" and s.labels == ok and s.value >= 1 for s in samples)
    assert "llmgw_time_to_first_token_seconds_bucket" in names
    assert "llmgw_endpoint_inflight" in names
    breakers = {s.labels["endpoint"] for s in samples if s.name == "llmgw_endpoint_breaker_open"}
    assert breakers == REPLICAS


def test_tokens_are_counted_for_streams_that_did_not_ask_for_usage(
    make_client: ClientFactory, gateway: GatewayProcess
) -> None:
    def completion_tokens() -> float:
        text = httpx.get(gateway.admin_url + "/metrics", timeout=5).text
        return sum(
            s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "llmgw_tokens_total" and s.labels == {"model": "chat-model", "kind": "completion"}
        )

    before = completion_tokens()
    list(
        make_client(gateway).chat.completions.create(
            model="chat-model", messages=[{"role": "user", "content": "count"}], max_tokens=7, stream=True
        )
    )
    deadline = time.monotonic() + 5
    while completion_tokens() < before + 7 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert completion_tokens() == before + 7, "router.inject_usage did not account the stream's tokens"


def test_session_affinity_keeps_a_conversation_on_one_replica(
    make_client: ClientFactory, gateway: GatewayProcess
) -> None:
    c = make_client(gateway)
    seen = set()
    for i in range(6):
        raw = c.chat.completions.with_raw_response.create(
            model="chat-model",
            messages=[{"role": "user", "content": f"turn {i}"}],
            max_tokens=2,
            extra_headers={"x-session-id": "conversation-42"},
        )
        seen.add(raw.headers["x-llmgw-replica"])
    assert len(seen) == 1


def test_shared_long_prefix_follows_the_replica_that_served_it(
    make_client: ClientFactory, gateway: GatewayProcess
) -> None:
    c = make_client(gateway)
    system = "You are a careful assistant for the finance team. " * 40
    seen = set()
    for i in range(6):
        raw = c.chat.completions.with_raw_response.create(
            model="chat-model",
            messages=[{"role": "system", "content": system}, {"role": "user", "content": f"question {i}"}],
            max_tokens=2,
        )
        seen.add(raw.headers["x-llmgw-replica"])
    assert len(seen) == 1


def test_metrics_listener_serves_metrics_only(gateway: GatewayProcess) -> None:
    address = yaml.safe_load(gateway.config_path.read_text())["metrics_listen"]
    assert "llmgw_requests_total" in httpx.get(f"http://{address}/metrics", timeout=5).text
    assert httpx.get(f"http://{address}/healthz", timeout=5).status_code == 404


def test_kv_usage_is_read_under_the_old_and_the_new_vllm_name(gateway: GatewayProcess) -> None:
    text = httpx.get(gateway.admin_url + "/metrics", timeout=5).text
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    kv = {s.labels["endpoint"] for s in samples if s.name == "llmgw_endpoint_kv_usage"}
    assert kv == REPLICAS
    waiting = {s.labels["endpoint"] for s in samples if s.name == "llmgw_endpoint_waiting"}
    assert waiting == REPLICAS


def test_llama_server_load_is_read_without_a_kv_figure() -> None:
    engine = sim("--model", "m", "--flavor", "llamacpp")
    gw = start_gateway({"endpoints": [endpoint("llama", engine, "m", engine="llamacpp")]})
    try:
        text = httpx.get(gw.admin_url + "/metrics", timeout=5).text
        samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
        names = {s.name for s in samples if s.labels.get("endpoint") == "llama"}
        assert {"llmgw_endpoint_waiting", "llmgw_endpoint_running", "llmgw_endpoint_inflight"} <= names
        assert "llmgw_endpoint_kv_usage" not in names
    finally:
        gw.stop()
        engine.stop()

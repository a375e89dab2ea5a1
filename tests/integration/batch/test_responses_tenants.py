"""The Responses API with auth on: stored responses and conversations belong to the
caller's project, another project's ids are answered 404 as if they did not exist, and
the chat completion behind each response goes through the key's own checks (a bad key is
401, a model the key may not use 404). Only the official `openai` client is used on the
client port; projects and keys come from the admin API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from llmgw.testing.server import GatewayProcess, running_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "chat-a", "--model", "chat-b")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def gateway(engine: SimEngineProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    store = tmp_path_factory.mktemp("responses-auth") / "llmgw.db"
    config = {
        "auth": {"enabled": True, "store": str(store), "flush_interval": "100ms"},
        "endpoints": [endpoint("sim-1", engine, "chat-a", "chat-b")],
    }
    with running_gateway(config, timeout=60.0) as process:
        yield process


def _project(gateway: GatewayProcess, name: str, **fields: Any) -> str:
    """A project in its own org and team; a new key for it."""
    token = gateway.admin_token()
    with httpx.Client(base_url=gateway.admin_url, headers={"authorization": f"Bearer {token}"}) as admin:
        for path, body in (
            ("/api/orgs", {"id": f"{name}-org"}),
            ("/api/teams", {"id": f"{name}-team", "org": f"{name}-org"}),
            ("/api/projects", {"id": name, "team": f"{name}-team", **fields}),
        ):
            assert admin.post(path, json=body).status_code < 300
        made = admin.post("/api/keys", json={"project": name})
        assert made.status_code < 300, made.text
        key: str = made.json()["key"]
        return key


Pair = tuple[openai.OpenAI, openai.OpenAI]


@pytest.fixture(scope="module")
def clients(gateway: GatewayProcess) -> Iterator[Pair]:
    keys = _project(gateway, "alpha"), _project(gateway, "beta", allowed_models=["chat-a"])
    made = [openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0, timeout=20) for key in keys]
    try:
        yield made[0], made[1]
    finally:
        for client in made:
            client.close()


def test_another_projects_response_does_not_exist_for_it(
    clients: Pair,
) -> None:
    alpha, beta = clients
    response = alpha.responses.create(model="chat-a", input="alpha's secret")
    assert alpha.responses.retrieve(response.id).id == response.id
    with pytest.raises(openai.NotFoundError):
        beta.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError):
        beta.responses.input_items.list(response.id)
    with pytest.raises(openai.NotFoundError):
        beta.responses.create(model="chat-a", input="steal", previous_response_id=response.id)
    with pytest.raises(openai.NotFoundError):
        beta.responses.delete(response.id)
    assert alpha.responses.retrieve(response.id).output_text == response.output_text
    streamed = list(beta.responses.create(model="chat-a", input="mine", stream=True))
    assert streamed[-1].type == "response.completed"
    with pytest.raises(openai.NotFoundError):
        alpha.responses.retrieve(streamed[-1].response.id)


def test_another_projects_conversation_does_not_exist_for_it(
    clients: Pair,
) -> None:
    alpha, beta = clients
    conversation = alpha.conversations.create(items=[{"type": "message", "role": "user", "content": "hi"}])
    with pytest.raises(openai.NotFoundError):
        beta.conversations.retrieve(conversation.id)
    with pytest.raises(openai.NotFoundError):
        beta.conversations.items.list(conversation.id)
    with pytest.raises(openai.NotFoundError):
        beta.responses.create(model="chat-a", input="join", conversation=conversation.id)
    assert len(alpha.conversations.items.list(conversation.id).data) == 1


def test_the_keys_own_checks_apply(gateway: GatewayProcess, clients: Pair) -> None:
    _, beta = clients
    stranger = openai.OpenAI(base_url=gateway.base_url, api_key="not-a-key", max_retries=0)
    with stranger, pytest.raises(openai.AuthenticationError):
        stranger.responses.create(model="chat-a", input="hello")
    # beta's project may use chat-a only: chat-b does not exist for it, here as on chat.
    with pytest.raises(openai.NotFoundError) as hidden:
        beta.responses.create(model="chat-b", input="hello")
    assert hidden.value.code == "model_not_found"


def test_a_response_leaves_the_usage_record_of_its_chat_completion(
    gateway: GatewayProcess, clients: Pair
) -> None:
    alpha, _ = clients
    alpha.responses.create(
        model="chat-a",
        input="count me",
        metadata={"run": "nightly"},
        extra_headers={"x-request-id": "resp-usage-1"},
    )
    token = gateway.admin_token()
    deadline = time.monotonic() + 15.0
    with httpx.Client(base_url=gateway.admin_url, headers={"authorization": f"Bearer {token}"}) as admin:
        while True:
            records = admin.get("/api/usage/records?limit=100&since=1h").json()["data"]
            mine = [r for r in records if r.get("request_id") == "resp-usage-1"]
            if mine:
                break
            assert time.monotonic() < deadline, "the usage record was never written"
            time.sleep(0.1)
    [record] = mine
    assert (record["project_id"], record["model"], record["status"]) == ("alpha", "chat-a", 200)
    assert record["completion_tokens"] > 0
    assert record["tags"] == {"run": "nightly"}

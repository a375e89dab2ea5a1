"""The Responses API and conversations on `llmgw server` without auth, in front of a
sim engine, through the official `openai` client only: what the SDK parses is the
contract. Stored objects live in the `threads` pool (`threads.store`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from llmgw.testing.server import GatewayProcess, running_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "chat-a")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def gateway(engine: SimEngineProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    folder: Path = tmp_path_factory.mktemp("threads")
    config = {
        "threads": {"store": str(folder / "threads.db"), "retain_hours": 2},
        "endpoints": [endpoint("sim-1", engine, "chat-a")],
    }
    with running_gateway(config, timeout=60.0) as process:
        yield process


@pytest.fixture
def client(gateway: GatewayProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0, timeout=20) as made:
        yield made


def test_a_response_is_made_stored_and_read_back(client: openai.OpenAI) -> None:
    response = client.responses.create(model="chat-a", input="hello there", instructions="Be brief.")
    assert response.object == "response"
    assert response.status == "completed"
    assert response.id.startswith("resp_")
    assert response.output_text
    assert response.usage is not None
    assert response.usage.input_tokens > 0
    again = client.responses.retrieve(response.id)
    assert again.output_text == response.output_text
    assert again.instructions == "Be brief."
    items = client.responses.input_items.list(response.id)
    assert [item.type for item in items.data] == ["message"]
    first = items.data[0]
    assert first.type == "message"
    assert first.role == "user"
    assert first.content[0].type == "input_text"
    assert first.content[0].text == "hello there"


def test_a_stream_is_the_responses_event_sequence(client: openai.OpenAI) -> None:
    events = list(client.responses.create(model="chat-a", input="stream please", stream=True))
    kinds = [event.type for event in events]
    assert kinds[:5] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    done = events[-1]
    assert done.type == "response.completed"
    assert done.response.output_text == deltas != ""
    assert done.response.usage is not None
    assert done.response.usage.output_tokens > 0
    stored = client.responses.retrieve(done.response.id)
    assert stored.output_text == deltas


def test_previous_response_id_sends_the_chain_to_the_model(client: openai.OpenAI) -> None:
    first = client.responses.create(model="chat-a", input="the first question")
    second = client.responses.create(model="chat-a", input="a follow-up", previous_response_id=first.id)
    assert second.previous_response_id == first.id
    assert second.usage is not None
    assert first.usage is not None
    # The chain came before the new input: the model read more than the new words.
    alone = client.responses.create(model="chat-a", input="a follow-up", store=False)
    assert alone.usage is not None
    assert second.usage.input_tokens > alone.usage.input_tokens
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(alone.id)  # store: false keeps nothing


def test_a_deleted_response_is_gone(client: openai.OpenAI) -> None:
    response = client.responses.create(model="chat-a", input="short-lived")
    client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="chat-a", input="more", previous_response_id=response.id)


def test_a_conversation_collects_its_responses_items(client: openai.OpenAI) -> None:
    conversation = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "remember: blue"}], metadata={"topic": "colour"}
    )
    assert conversation.object == "conversation"
    assert conversation.metadata == {"topic": "colour"}
    added = client.conversations.items.create(
        conversation.id, items=[{"type": "message", "role": "user", "content": "and green"}]
    )
    assert len(added.data) == 1
    response = client.responses.create(model="chat-a", input="what colours?", conversation=conversation.id)
    assert response.conversation is not None
    assert response.conversation.id == conversation.id
    items = client.conversations.items.list(conversation.id, order="asc")
    kinds = [(item.type, getattr(item, "role", None)) for item in items.data]
    assert kinds == [
        ("message", "user"),
        ("message", "user"),
        ("message", "user"),
        ("message", "assistant"),
    ]
    page = client.conversations.items.list(conversation.id, limit=2)
    assert page.has_more
    assert len(page.data) == 2
    assert client.conversations.retrieve(conversation.id).id == conversation.id
    client.conversations.delete(conversation.id)
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conversation.id)


def test_bad_input_is_refused_in_openais_shape_and_nothing_is_kept(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="chat-a", input=[{"type": "web_search_call", "id": "x"}])  # type: ignore[misc, list-item]
    assert refused.value.param == "input[0].type"
    with pytest.raises(openai.BadRequestError) as hosted:
        client.responses.create(model="chat-a", input="hi", tools=[{"type": "web_search"}])
    assert hosted.value.param == "tools[0].type"
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="no-such-model", input="hi")
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="chat-a", input="hi", previous_response_id="resp_missing")
    conversation = client.conversations.create()
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="no-such-model", input="lost", conversation=conversation.id)
    assert client.conversations.items.list(conversation.id).data == []


def test_function_tools_and_call_items_reach_the_model(client: openai.OpenAI) -> None:
    weather = {
        "type": "function",
        "name": "weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    response = client.responses.create(
        model="chat-a",
        tools=[weather],  # type: ignore[list-item]
        input=[
            {"type": "message", "role": "user", "content": "weather in Oslo?"},
            {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city":"Oslo"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "rain, 7 C"},
        ],
    )
    assert response.status == "completed"
    assert [tool.type for tool in response.tools] == ["function"]
    items = client.responses.input_items.list(response.id, order="asc")
    assert [item.type for item in items.data] == ["message", "function_call", "function_call_output"]

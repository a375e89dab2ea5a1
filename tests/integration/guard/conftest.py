"""An echoing sim engine and OpenAI clients for the guard's integration tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import openai
import pytest

from llmgw.testing.server import GatewayProcess
from llmgw.testing.sim import SimEngineProcess
from support.sims import sim


@pytest.fixture(scope="module")
def echo_sim() -> Iterator[SimEngineProcess]:
    """A sim that answers with the last user message, 8 characters a token."""
    engine = sim("--model", "chat-model", "--echo", "--default-max-tokens", "400")
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture
def client_for() -> Iterator[Callable[[GatewayProcess], openai.OpenAI]]:
    made: list[openai.OpenAI] = []

    def make(gateway: GatewayProcess) -> openai.OpenAI:
        client = openai.OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0, timeout=20)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()

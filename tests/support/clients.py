"""OpenAI clients for tests, closed when the test ends (an unclosed client's socket is a
ResourceWarning, and warnings are errors here)."""

from __future__ import annotations

from collections.abc import Callable

import openai

from llmgw.testing.server import GatewayProcess

ClientFactory = Callable[[GatewayProcess], openai.OpenAI]

"""Fixtures for the sim's real-process tests: engines on 127.0.0.1, stopped by PID."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sim_http_helpers import FAST

from llmgw.testing.sim import SimEngineProcess, start_sim_engine


@pytest.fixture(scope="session")
def vllm_sim() -> Iterator[SimEngineProcess]:
    """One vLLM-flavored sim shared by the read-mostly tests (assert on deltas, not totals)."""
    with start_sim_engine(
        *FAST, "--model", "sim-model", "--model", "alias", "--adapter", "sql-lora", "--seed", "7",
        "--embedding-dim", "64", "--prompt-tokens-details",
    ) as sim:  # fmt: skip
        yield sim

"""Real agents (`python -m llmgw agent`) against the fake control plane, on loopback.

Every engine an agent starts in these tests is found again from the agent's state
directory when the test ends and killed by its PID (checked against its start time), so
that a failing test cannot leave engines behind.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from agent_helpers import PORT_RANGE, AgentProcess, AgentStarter, kill_engines, launch_agent

from llmgw.protocol.messages import NodeSettings
from llmgw.testing.agent import FakeControlPlane


def _control() -> FakeControlPlane:
    return FakeControlPlane(
        settings=NodeSettings(port_range=PORT_RANGE), heartbeat_interval=timedelta(milliseconds=500)
    )


@contextlib.contextmanager
def _agents(tmp: Path) -> Iterator[AgentStarter]:
    started: list[AgentProcess] = []

    def start(server: str, node_id: str = "n1", *args: str, **options: object) -> AgentProcess:
        return launch_agent(started, tmp, server, node_id, *args, **options)

    try:
        yield start
    finally:
        for handle in started:
            handle.stop()
        for state in {h.state_dir for h in started}:
            kill_engines(state)


@pytest.fixture
def control() -> Iterator[FakeControlPlane]:
    with _control() as plane:
        yield plane


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[AgentStarter]:
    """Starts agents; when the test ends, stops them and kills the engines they left."""
    with _agents(tmp_path) as start:
        yield start


@pytest.fixture(scope="module")
def module_control() -> Iterator[FakeControlPlane]:
    """One control plane for a whole module, whose tests share one agent."""
    with _control() as plane:
        yield plane


@pytest.fixture(scope="module")
def module_agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentStarter]:
    """`start_agent` for a whole module: an agent process costs seconds to start."""
    with _agents(tmp_path_factory.mktemp("agents")) as start:
        yield start

"""The `llmgw` command loads only what a command needs: the operator's commands (keys,
usage, ctl, config) talk to a server over HTTP and must not wait for the server's,
the agent's or the sim's own modules to import. Checked by what a fresh interpreter
has imported, not by timing it."""

from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "sqlalchemy",
    "alembic",
    "aiohttp",
    "uvloop",
    "opentelemetry",
    "llmgw.store",
    "llmgw.router",
    "llmgw.agent.node",
)


def test_loading_the_command_line_leaves_the_roles_unimported() -> None:
    probe = f"import sys, llmgw.cli.main; print(','.join(name for name in {HEAVY!r} if name in sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    assert loaded == "", f"importing the command line imported {loaded}"


def test_the_roles_still_load_when_asked_for() -> None:
    probe = "import llmgw.auth, llmgw.sim; print(llmgw.auth.AuthGate.__name__, llmgw.sim.SimState.__name__)"
    answer = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    assert answer == ["AuthGate", "SimState"]

"""Every example configuration passes `llmgw config check`: an example that does not
load teaches the wrong thing.

The command runs in this process (typer's test runner) rather than as a child: it is
the same command, and test_cli_config already covers the command as a process."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmgw.cli.main import app

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


def test_there_are_examples() -> None:
    names = {path.name for path in EXAMPLES}
    assert {"router-only.yaml", "cluster.yaml"} <= names


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_example_passes_config_check(example: Path) -> None:
    # tests/conftest.py clears the caller's LLMGW_ variables.
    result = CliRunner().invoke(app, ["config", "check", str(example)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: ")

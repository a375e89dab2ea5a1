"""`--log-format` on the long-running commands: a format that does not exist is refused
in one sentence (exit status 2) before anything starts, by `llmgw server` and
`llmgw agent` alike, and so is a `log_format` setting that does not exist."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CONFIG = """\
endpoints:
  - {id: a, url: "http://127.0.0.1:9", models: [demo]}
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("LLMGW_")}
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


@pytest.mark.parametrize(
    "command",
    [
        ("llmgw", "server"),
        ("llmgw.cli.agent", "--server", "http://127.0.0.1:9", "--insecure"),
    ],
)
def test_an_unknown_format_is_refused_in_one_sentence(command: tuple[str, ...]) -> None:
    run = _run(*command, "--log-format", "xml")
    assert run.returncode == 2
    assert run.stderr == "--log-format 'xml' is not one of text, json\n"


def test_an_unknown_log_format_setting_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "llmgw.yaml"
    config.write_text(CONFIG + "log_format: xml\n", encoding="utf-8")
    run = _run("llmgw", "server", "--config", str(config))
    assert run.returncode == 2
    assert "log_format" in run.stderr
    assert "use text or json" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "secrets").exists()  # refused before anything was made

"""`llmgw server` names each setting in use that this version does not act on as it
starts, and `--strict` refuses to start on them (exit status 2, each on stderr)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

INERT = """\
releases: https://mirror.example/llmgw
endpoints:
  - {id: a, url: "http://127.0.0.1:9", models: [demo]}
"""


def test_strict_refuses_to_start_on_an_inert_setting(tmp_path: Path) -> None:
    config = tmp_path / "llmgw.yaml"
    config.write_text(INERT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("LLMGW_")}
    run = subprocess.run(
        [sys.executable, "-m", "llmgw", "server", "--config", str(config), "--strict"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert run.returncode == 2
    assert run.stderr == (
        "releases: this version has no `llmgw ctl upgrade`; nothing is downloaded from releases"
        " (refused by --strict)\n"
    )
    assert not (tmp_path / "secrets").exists()  # refused before anything was made

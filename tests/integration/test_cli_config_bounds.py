"""`llmgw config check` on numbers and durations no deployment could mean: exit 2 with
one sentence naming the setting, never a traceback (a duration past timedelta's range
was an OverflowError, exit 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

AUTH = "auth:\n  enabled: true\n  store: {store}\n"


@pytest.mark.parametrize(
    ("extra", "setting"),
    [
        ("  cache_ttl: 99999999999h\n", "auth.cache_ttl"),
        ("  max_key_ttl: " + "9" * 400 + "h\n", "auth.max_key_ttl"),
        ("  personal:\n    budget: 1e308\n", "auth.personal.budget"),
        ("  personal:\n    budget: .nan\n", "auth.personal.budget"),
        ("  default_rpm: " + "1" * 40 + "\n", "auth.default_rpm"),
        ("  pricing:\n    m:\n      prompt_per_1k: " + "1" * 40 + "\n", "auth.pricing.m.prompt_per_1k"),
    ],
)
def test_an_oversized_setting_is_one_sentence_and_exit_2(tmp_path: Path, extra: str, setting: str) -> None:
    config = tmp_path / "llmgw.yaml"
    config.write_text(AUTH.format(store=tmp_path / "llmgw.db") + extra)
    checked = subprocess.run(
        [sys.executable, "-m", "llmgw", "config", "check", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 2, checked.stderr
    assert "Traceback" not in checked.stderr
    lines = [line for line in (checked.stdout + checked.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert f"{setting}:" in lines[0]

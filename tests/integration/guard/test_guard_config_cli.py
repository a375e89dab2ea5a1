"""`llmgw config show` says what each guard policy does; `llmgw config check` refuses a
model check whose judge is not a guard model of the file, in one sentence."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

BASE = {
    "endpoints": [
        {"id": "a", "url": "http://127.0.0.1:9", "models": ["chat-model", "judge"], "engine": "sim"}
    ],
    "models": [
        {"name": "chat-model"},
        {"name": "judge", "role": "guard", "guard": {"format": "llamaguard3"}, "scaling": {"min": 1}},
    ],
    "guard": {
        "default": "base",
        "policies": [
            {"name": "base", "checks": [{"type": "pii", "stage": "both", "action": "redact"}]},
            {
                "name": "strict",
                "checks": [{"type": "model", "model": "judge", "categories": ["S1"], "action": "flag"}],
            },
        ],
    },
}


def _llmgw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmgw", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_show_describes_each_policy_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "guard.yaml"
    path.write_text(yaml.safe_dump(BASE), encoding="utf-8")
    run = _llmgw("config", "show", str(path))
    assert run.returncode == 0, run.stderr
    assert (
        "#   base (guard.default: every request)\n#     input: pii → redact\n#     output: pii → redact"
        in run.stdout
    )
    assert "#     input: judge judge in S1, on error block after 5s → flag" in run.stdout
    again = tmp_path / "again.yaml"
    again.write_text(run.stdout, encoding="utf-8")
    assert _llmgw("config", "show", str(again)).stdout == run.stdout


def test_a_judge_that_is_not_a_guard_model_is_refused(tmp_path: Path) -> None:
    config = yaml.safe_load(yaml.safe_dump(BASE))
    config["guard"]["policies"][1]["checks"][0]["model"] = "chat-model"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    run = _llmgw("config", "check", str(path))
    assert run.returncode == 2
    assert "guard.policies[1].checks[0].model" in run.stderr
    assert "'chat-model' serves clients and judges nothing: name a model with role: guard" in run.stderr
    config["guard"]["policies"][1]["checks"][0]["model"] = "nobody"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    run = _llmgw("config", "check", str(path))
    assert "'nobody' is not a model of this file" in run.stderr

"""`llmgw ctl eval` through real processes: `llmgw server` router-only in front of sims,
with the model's eval gate on the built-in `arithmetic` suite. A sim that answers right
passes (exit 0); one started with `--eval-wrong` fails (exit 1) with its cases listed,
the result shown by `llmgw ctl explain`, and, as a canary candidate, held at 0 %. A
suite that exists nowhere is one clear sentence, at the command and at config load.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import SimEngineProcess, start_sim_engine
from support.sims import endpoint

pytestmark = pytest.mark.slow

SIM_ARGS = ("--decode-ms", "1", "--prefill-ms-per-token", "0.01")
ENV = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home())}


@dataclass
class Rig:
    good: SimEngineProcess
    bad: SimEngineProcess
    gateway: GatewayProcess


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    good = start_sim_engine(*SIM_ARGS, "--model", "chat")
    bad = start_sim_engine(*SIM_ARGS, "--model", "chat-next", "--eval-wrong")
    gateway: GatewayProcess | None = None
    try:
        gateway = start_gateway(
            {
                "endpoints": [endpoint("sim-good", good, "chat"), endpoint("sim-bad", bad, "chat-next")],
                "models": [
                    {"name": "chat", "canary": {"model": "chat-next", "percent": 50}},
                    {"name": "chat-next", "eval": {"suite": "arithmetic", "min_score": 0.9}},
                ],
            }
        )
        yield Rig(good, bad, gateway)
    finally:
        if gateway is not None:
            gateway.stop()
        bad.stop()
        good.stop()


def _ctl(rig: Rig, *args: str) -> subprocess.CompletedProcess[str]:
    admin = ("--admin", rig.gateway.admin_url, "--token", rig.gateway.admin_token())
    return subprocess.run(
        [sys.executable, "-m", "llmgw", "ctl", *admin, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=ENV,
    )


def _canary(rig: Rig) -> dict[str, Any]:
    answer = httpx.get(
        f"{rig.gateway.admin_url}/api/router/canaries/chat",
        headers={"authorization": f"Bearer {rig.gateway.admin_token()}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_a_right_sim_passes_arithmetic(rig: Rig) -> None:
    ran = _ctl(rig, "eval", "chat", "--suite", "arithmetic")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "eval arithmetic on chat" in ran.stdout
    assert "score 1.00 (20/20 cases) passes min_score 0.9" in ran.stdout
    assert "failed" not in ran.stdout


def test_a_wrong_sim_fails_with_its_cases_and_is_held_back(rig: Rig) -> None:
    assert _canary(rig)["percent_in_force"] == 50
    ran = _ctl(rig, "eval", "chat-next")  # the gate's suite
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "score 0.00 (0/20 cases) fails min_score 0.9" in ran.stdout
    assert "  failed add-01: expected '5', got '6'" in ran.stdout
    assert ran.stdout.count("  failed add-") == 20
    canary = _canary(rig)
    assert canary["percent_in_force"] == 0
    assert canary["state"] == "eval_failed"
    explained = _ctl(rig, "explain", "chat")
    assert explained.returncode == 0, explained.stderr
    assert "chat-next failed its eval gate (score 0.00 on arithmetic under min_score 0.9)" in explained.stdout
    shown = _ctl(rig, "explain", "chat-next")
    assert "eval arithmetic on chat-next" in shown.stdout
    assert "failed add-20" in shown.stdout
    # An operator's canary reset does not lift an eval hold.
    assert _ctl(rig, "model", "canary-reset", "chat").returncode == 0
    assert _canary(rig)["percent_in_force"] == 0


def test_json_format_passes_on_a_right_sim(rig: Rig) -> None:
    ran = _ctl(rig, "eval", "chat", "--suite", "json-format", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert '"score":1.0' in ran.stdout


def test_a_missing_suite_is_one_sentence(rig: Rig) -> None:
    ran = _ctl(rig, "eval", "chat", "--suite", "no-such-suite")
    assert ran.returncode == 2
    assert ran.stderr.startswith("error: 404: eval suite 'no-such-suite' is neither")
    assert "name a built-in suite" in ran.stderr
    assert "Traceback" not in ran.stderr
    unknown = _ctl(rig, "eval", "nobody", "--suite", "arithmetic")
    assert unknown.returncode == 2
    assert "model 'nobody' is not in the catalog" in unknown.stderr


def test_a_gate_naming_a_missing_suite_fails_config_check(tmp_path: Path) -> None:
    config = tmp_path / "llmgw.yaml"
    settings = {
        "endpoints": [{"id": "e", "url": "http://127.0.0.1:9", "models": ["chat"]}],
        "models": [{"name": "chat", "eval": {"suite": "aritmetic"}}],
        "control": {"eval_dir": str(tmp_path)},
    }
    config.write_text(yaml.safe_dump(settings))
    checked = subprocess.run(
        [sys.executable, "-m", "llmgw", "config", "check", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=ENV,
    )
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert f"eval suite 'aritmetic' is neither {tmp_path}/aritmetic.jsonl nor one llmgw carries" in (
        checked.stdout + checked.stderr
    )
    # The directory's suite of that name is found.
    messages = [{"role": "user", "content": "1+1"}]
    case = {"id": "a", "messages": messages, "check": {"type": "exact", "value": "2"}}
    (tmp_path / "aritmetic.jsonl").write_text(json.dumps(case) + "\n")
    again = subprocess.run(
        [sys.executable, "-m", "llmgw", "config", "check", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=ENV,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "aritmetic" not in again.stdout + again.stderr

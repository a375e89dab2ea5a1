"""A policy attached to one project (`llmgw ctl guard attach`, as a process) applies to
that project's keys and not to another's, without a restart; detached, it stops."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint

LLMGW = Path(sys.executable).with_name("llmgw")


def _llmgw(gateway: GatewayProcess, *args: str, ok: bool = True) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LLMGW_")}
    done = subprocess.run(
        [str(LLMGW), *args, "--config", str(gateway.config_path)],
        capture_output=True,
        text=True,
        env={**clean, "COLUMNS": "80"},
        timeout=60,
        check=False,
    )
    assert (done.returncode == 0) == ok, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def gateway(echo_sim: SimEngineProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    where = tmp_path_factory.mktemp("guard-attach")
    config = {
        "endpoints": [endpoint("echo", echo_sim, "chat-model")],
        "models": [{"name": "chat-model"}],
        "auth": {"enabled": True, "store": str(where / "llmgw.db")},
        "guard": {
            "default": "base",
            "policies": [
                {"name": "base", "checks": [{"type": "pii", "action": "redact"}]},
                {
                    "name": "no-zeus",
                    "checks": [{"type": "regex", "patterns": ["(?i)zeus"], "action": "block"}],
                },
                {"name": "watch", "checks": [{"type": "regex", "patterns": ["budget"], "action": "flag"}]},
            ],
        },
    }
    handle = start_gateway(config, timeout=60)
    try:
        _llmgw(handle, "orgs", "create", "acme")
        _llmgw(handle, "teams", "create", "search", "--org", "acme")
        _llmgw(handle, "projects", "create", "ranker", "--team", "search")
        _llmgw(handle, "projects", "create", "crawler", "--team", "search")
        yield handle
    finally:
        handle.stop()


def _key(gateway: GatewayProcess, project: str) -> str:
    made = _llmgw(gateway, "keys", "create", "--project", project)
    return next(line for line in made.splitlines() if line.startswith("llmgw-"))


def _ask(gateway: GatewayProcess, key: str, text: str) -> str:
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0, timeout=20) as client:
        answer = client.chat.completions.create(
            model="chat-model", messages=[{"role": "user", "content": text}]
        )
    return str(answer.choices[0].message.content)


def test_attached_policy_applies_to_its_project_only(gateway: GatewayProcess) -> None:
    ranker, crawler = _key(gateway, "ranker"), _key(gateway, "crawler")
    assert _ask(gateway, ranker, "about zeus") == "about zeus"
    assert "attached no-zeus to project ranker" in _llmgw(
        gateway, "ctl", "guard", "attach", "no-zeus", "--project", "ranker"
    )
    assert "no-zeus" in _llmgw(gateway, "ctl", "guard", "list")
    with pytest.raises(openai.BadRequestError) as caught:
        _ask(gateway, ranker, "about zeus")
    assert isinstance(caught.value.body, dict)
    assert "'no-zeus'" in caught.value.body["message"]
    # The default still applies to both, and the other project is not blocked.
    assert _ask(gateway, ranker, "mail a@example.com") == "mail [EMAIL]"
    assert _ask(gateway, crawler, "about zeus, a@example.com") == "about zeus, [EMAIL]"
    _llmgw(gateway, "ctl", "guard", "detach", "no-zeus", "--project", "ranker")
    assert _ask(gateway, ranker, "about zeus") == "about zeus"


def test_unknown_policy_or_scope_is_refused_in_one_line(gateway: GatewayProcess) -> None:
    out = _llmgw(gateway, "ctl", "guard", "attach", "nope", "--project", "ranker", ok=False)
    assert "policy 'nope' is not one of guard.policies (base, no-zeus, watch)" in out
    out = _llmgw(gateway, "ctl", "guard", "attach", "no-zeus", "--project", "ghost", ok=False)
    assert "ghost" in out
    out = _llmgw(gateway, "ctl", "guard", "attach", "no-zeus", ok=False)
    assert "name exactly one of --org, --team, --project or --user" in out


def test_a_flag_is_named_in_the_usage_record(gateway: GatewayProcess) -> None:
    key = _key(gateway, "crawler")
    _llmgw(gateway, "ctl", "guard", "attach", "watch", "--project", "crawler")
    assert _ask(gateway, key, "the budget for march") == "the budget for march"
    headers = {"authorization": f"Bearer {gateway.admin_token()}"}
    deadline = time.monotonic() + 30
    flagged: list[dict[str, object]] = []
    while not flagged and time.monotonic() < deadline:
        records = httpx.get(gateway.admin_url + "/api/usage/records", headers=headers, timeout=5).json()[
            "data"
        ]
        flagged = [r for r in records if r.get("tags", {}).get("guard") == "watch/regex"]
        time.sleep(0.2)
    assert flagged, "no usage record names the flag"
    _llmgw(gateway, "ctl", "guard", "detach", "watch", "--project", "crawler")

"""The control plane starts as the configuration's shape says (`control_plane_mode`), and
brings the store with it, so `llmgw ctl` and `/api` work with auth off.

examples/control-plane.yaml is started as written (only its ports moved to free ones),
and `llmgw ctl models`, run as a subprocess, lists its models. A file with no static
endpoints and `control.enabled` left off runs a control plane too; a router-only file
serves no `/api`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import yaml
from control_helpers import clean_env

from llmgw.testing.server import free_port, running_gateway

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _ctl(admin_url: str, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmgw", "ctl", "--admin", admin_url, "--token", token, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        check=False,
    )


def _example(name: str) -> dict[str, Any]:
    document = yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    document["agent_listen"] = f"127.0.0.1:{free_port()}"
    return document


def test_ctl_models_works_on_the_control_plane_example_with_auth_off() -> None:
    config = _example("control-plane.yaml")
    assert config.get("auth", {}).get("enabled", False) is False
    with running_gateway(config) as server:
        token = server.admin_token()
        listed = _ctl(server.admin_url, token, "models", "--json")
        assert listed.returncode == 0, listed.stderr
        names = {row["name"] for row in json.loads(listed.stdout)}
        assert names == {"chat", "lazy"}
        # The store is the default SQLite file, beside the admin token.
        assert (server.config_path.parent / "secrets" / "llmgw.db").is_file()
        inert = httpx.get(
            server.admin_url + "/api/settings/inert", headers={"authorization": f"Bearer {token}"}
        )
        assert inert.status_code == 200
        # The firewall, on by default, is acted on: no setting of the example is inert.
        assert inert.json() == {"data": []}
        assert "not enforced" not in server.log()


def test_no_static_endpoints_start_a_control_plane_without_control_enabled() -> None:
    config = {
        "agent_listen": f"127.0.0.1:{free_port()}",
        "agent_insecure": True,
        "firewall": {"enabled": False},
    }
    with running_gateway(config) as server:
        token = server.admin_token()
        leader = _ctl(server.admin_url, token, "leader")
        assert leader.returncode == 0, leader.stderr
        inert = httpx.get(
            server.admin_url + "/api/settings/inert", headers={"authorization": f"Bearer {token}"}
        )
        assert inert.json() == {"data": []}


def test_a_router_only_file_serves_no_admin_api() -> None:
    config = {
        "endpoints": [{"id": "a", "url": f"http://127.0.0.1:{free_port()}", "models": ["demo"]}],
        "agent_listen": f"127.0.0.1:{free_port()}",
    }
    with running_gateway(config) as server:
        answer = httpx.get(server.admin_url + "/api/control/models")
        assert answer.status_code == 404
        assert "control plane" in answer.json()["error"]["message"]
        assert not (server.config_path.parent / "secrets").exists()

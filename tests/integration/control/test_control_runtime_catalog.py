"""The runtime catalog through the whole server: with auth on (so the server has a
store), `llmgw ctl model add` over the admin API puts a model in the store; the control
plane places it on an agent and the router serves it, with no restart. The server holds
the leader lease, and `llmgw ctl` shows it, the node and the replica.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import yaml
from control_helpers import cluster, server_config, sim_model, wait_for

from llmgw.testing.server import start_gateway


def _ctl(admin_url: str, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmgw", "ctl", "--admin", admin_url, "--token", token, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_model_added_at_run_time_is_placed_and_served(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        config = server_config(c.agent_port, sim_model("first", min=1))
        config["auth"] = {"enabled": True, "store": str(tmp_path / "llmgw.db")}
        server = start_gateway(config, timeout=60)
        c.servers.append(server)
        token = server.admin_token()
        c.start_agent("node-a")

        definition = tmp_path / "added.yaml"
        definition.write_text(yaml.safe_dump(sim_model("added", min=1)))
        added = _ctl(server.admin_url, token, "model", "add", str(definition))
        assert added.returncode == 0, added.stderr + c.logs()

        admin = {"authorization": f"Bearer {token}"}
        for path, body in (
            ("/api/orgs", {"id": "o"}),
            ("/api/teams", {"id": "t", "org": "o"}),
            ("/api/projects", {"id": "p", "team": "t"}),
        ):
            made = httpx.post(server.admin_url + path, json=body, headers=admin)
            assert made.status_code == 201, made.text
        made_key = httpx.post(server.admin_url + "/api/keys", json={"project": "p"}, headers=admin)
        api_key = made_key.json()["key"]
        auth = {"authorization": f"Bearer {api_key}"}

        def answered() -> bool:
            response = httpx.post(
                server.base_url + "/chat/completions",
                json={"model": "added", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
                headers=auth,
                timeout=90,
            )
            return response.status_code == 200

        wait_for(answered, 90, "the model added at run time never answered:\n" + c.logs(), pause=0.5)
        listed = httpx.get(server.base_url + "/models", headers=auth).json()
        assert {"first", "added"} <= {entry["id"] for entry in listed["data"]}

        leader = _ctl(server.admin_url, token, "leader")
        assert leader.returncode == 0, leader.stderr
        assert "term" in leader.stdout.lower()
        nodes = _ctl(server.admin_url, token, "nodes")
        assert "node-a" in nodes.stdout
        replicas = _ctl(server.admin_url, token, "replicas")
        assert "added" in replicas.stdout
        assert "ready" in replicas.stdout

        removed = _ctl(server.admin_url, token, "model", "remove", "added")
        assert removed.returncode == 0, removed.stderr
        wait_for(lambda: not c.engines("added"), 60, "the removed model's engine was never stopped")

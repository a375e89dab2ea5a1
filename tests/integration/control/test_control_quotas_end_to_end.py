"""Owners' GPU quotas through the whole server: a server with auth on (so a SQLite store)
whose catalog has a sim model owned by a project, and an agent that reads four H100s
from a recorded `nvidia-smi` on its PATH (the sim engine runs on any machine; the cards
are what placement and the quotas count). The org's quota caps the project's model
below its floor; raising the team's and clearing the org's from the command line lets
the plane place up to the team's quota, at once and with no restart; `ctl explain`
names the scope that holds it back and the figures.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import httpx
from control_helpers import FAST_SIM, cluster, server_config, wait_for
from typer.testing import CliRunner

from llmgw.cli.main import app
from llmgw.store import Scope, Store
from llmgw.testing.server import start_gateway

# Four H100s as `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` prints them.
SMI_QUERY = "".join(
    f"{i}, GPU-00000000-0000-0000-0000-00000000000{i}, NVIDIA H100 80GB HBM3, 81559, 700.00, 70.00,"
    " Disabled\n"
    for i in range(4)
)


def fake_nvidia_smi(where: Path) -> dict[str, str]:
    """A directory holding an `nvidia-smi` that prints the recorded query, first on a
    PATH for the agent."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "query.txt").write_text(SMI_QUERY)
    script = where / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncat '{where / 'query.txt'}'\n")
    script.chmod(0o755)
    return {"PATH": f"{where}{os.pathsep}{os.environ.get('PATH', '')}"}


def gpu_sim_model(name: str, owner: str, minimum: int) -> dict[str, Any]:
    profile = {
        "name": "h100",
        "engine": "sim",
        "gpu_class": "h100-80g",
        "args": FAST_SIM,
        "startup_timeout": "60s",
    }
    return {
        "name": name,
        "source": f"sim/{name}",
        "owner": owner,
        "profiles": [profile],
        "scaling": {"min": minimum, "max": minimum},
    }


async def _tree(location: str) -> None:
    """The tenancy tree, written before the server starts: the org capped at 2 devices."""
    store = await Store.open(location)
    try:
        for scope in (
            Scope("org", "o", gpu_quota=2, created_at=1, updated_at=1),
            Scope("team", "t", parent="o", created_at=1, updated_at=1),
            Scope("project", "p", parent="t", created_at=1, updated_at=1),
        ):
            await store.tenancy.create(scope)
    finally:
        await store.close()


def test_quotas_set_on_the_tree_hold_placement_back_and_a_change_applies_at_once(tmp_path: Path) -> None:
    location = str(tmp_path / "llmgw.db")
    asyncio.run(_tree(location))
    with cluster(tmp_path) as c:
        config = server_config(c.agent_port, gpu_sim_model("chat", "project:p", 4))
        config["auth"] = {"enabled": True, "store": location}
        server = start_gateway(config, timeout=60)
        c.servers.append(server)
        token_file = server.config_path.parent / "secrets" / "admin-token"
        token = token_file.read_text().strip()
        c.start_agent("gpu-a", env=fake_nvidia_smi(tmp_path / "smi"))

        def explain() -> str:
            answer = httpx.get(
                server.admin_url + "/api/control/models/chat/explain",
                headers={"authorization": f"Bearer {token}"},
                timeout=10,
            )
            assert answer.status_code == 200, answer.text
            return " ".join(answer.json()["lines"])

        def engines() -> int:
            return len(c.engines("chat").get("gpu-a", {}))

        org_cap = "org:o, above owner project:p, holds 2 of its 2 cards, and a replica takes 1"
        held = "the org's quota never held:\n"
        wait_for(lambda: engines() == 2 and org_cap in explain(), 90, held + c.logs())

        def cli(*args: str) -> Any:
            group, *rest = args
            connect = ["--admin", server.admin_url, "--token-file", str(token_file)]
            runner = CliRunner(env={"LLMGW_ADMIN_TOKEN": None})
            result = runner.invoke(app, [group, *connect, *rest, "--json"])
            assert result.exit_code == 0, result.output
            return json.loads(result.output)

        [team] = cli("teams", "set", "t", "--gpu-quota", "3")
        assert team["gpu_quota"] == 3
        [org] = cli("orgs", "set", "o", "--clear", "gpu_quota")
        assert org["gpu_quota"] is None
        assert [row["gpu_quota"] for row in cli("teams", "list")] == [3]

        team_cap = "team:t, above owner project:p, holds 3 of its 3 cards, and a replica takes 1"
        raised = "the raised quota was not applied:\n"
        wait_for(lambda: engines() == 3 and team_cap in explain(), 90, raised + c.logs())
        # Four cards and a floor of four: only the team's quota keeps the fourth out.
        assert "3 live" in explain()

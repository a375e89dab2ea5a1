"""Engines started by the control plane demand their replica's key, and the gateway
sends it: a request straight to the engine without the key (or with another one) is
refused with 401 while the same request through the gateway is answered. The key comes
from the cluster's secret, kept in the server's store (with auth off, the SQLite file
beside the admin token), so a server restarted on the same configuration still reaches
the engine it adopts (same process, no restart)."""

from __future__ import annotations

import stat
from pathlib import Path

import httpx
import pytest
from control_helpers import Cluster, cluster, server_config, sim_model, wait_for

from llmgw.agent.state import StateDir
from llmgw.testing.server import start_gateway

pytestmark = pytest.mark.slow

CHAT = {"model": "chat", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}


def _engine_url(c: Cluster) -> str:
    [record] = [r for r in StateDir(c.agents["n1"].state_dir).load_all() if r.model == "chat"]
    return record.url


def _straight(url: str, key: str | None) -> int:
    headers = {"authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.post(url + "/v1/chat/completions", json=CHAT, headers=headers, timeout=30).status_code


def _through_gateway(c: Cluster) -> int:
    try:
        status: int = c.chat("chat", timeout=30).status_code
        return status
    except httpx.HTTPError:
        return 0


def test_an_engine_refuses_callers_without_its_key_and_a_restarted_server_still_reaches_it(
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "keys" / "admin-token"
    config = server_config(0, sim_model("chat", min=1, max=1), unreachable_after="2s")
    with cluster(tmp_path) as c:
        config["agent_listen"] = f"127.0.0.1:{c.agent_port}"
        config["admin_token_file"] = str(token_file)
        c.servers.append(start_gateway(config, timeout=60))
        c.start_agent("n1")
        engines = wait_for(lambda: c.engines("chat"), 60, "the engine never ran:\n" + c.logs())
        wait_for(
            lambda: _through_gateway(c) == 200, 60, "the gateway never answered:\n" + c.logs(), pause=0.3
        )

        url = _engine_url(c)
        assert _straight(url, None) == 401, "an engine answered a caller without its key"
        assert _straight(url, "not-the-key") == 401
        store = token_file.parent / "llmgw.db"
        assert stat.S_IMODE(store.stat().st_mode) == 0o600  # it holds the cluster's secret
        assert not (token_file.parent / "cluster-secret").exists()  # kept in the store instead

        c.server.stop()
        c.servers.append(start_gateway(config, timeout=60))
        wait_for(
            lambda: _through_gateway(c) == 200,
            60,
            "the restarted server never reached the adopted engine:\n" + c.logs(),
            pause=0.3,
        )
        assert c.engines("chat") == engines, "the engine was restarted instead of adopted"

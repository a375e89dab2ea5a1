"""A cluster bootstrapped by the command line, end to end: `llmgw server init` makes the
CA, the control plane's certificate and the admin token (0600, in folders 0700) and puts
`agent_tls` in the configuration; `llmgw node add` issues two node bundles; a real
`llmgw server` on that configuration takes both agents over mutual TLS, and `llmgw ctl
nodes` shows when each certificate runs out; `llmgw node remove` revokes one, which is
sent away and refused when it dials again, while the other stays."""

from __future__ import annotations

import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from control_helpers import Cluster, clean_env, cluster, server_config, wait_for

from llmgw.testing.server import GatewayProcess, start_gateway

pytestmark = pytest.mark.slow

YEAR_S = 365 * 86_400


def _llmgw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmgw", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        check=False,
    )


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _bundle_args(bundle: Path) -> tuple[str, ...]:
    return (
        "--tls-cert",
        str(bundle / "node.crt"),
        "--tls-key",
        str(bundle / "node.key"),
        "--tls-ca",
        str(bundle / "ca.crt"),
    )


def _start_server(c: Cluster, config_file: Path) -> GatewayProcess:
    """The server on what init wrote, with the cluster's agent port and quick timings; the
    same admin token file (and so the same store) the node commands use."""
    written: dict[str, Any] = yaml.safe_load(config_file.read_text())
    config = server_config(c.agent_port) | {"agent_tls": written["agent_tls"]}
    del config["agent_insecure"]
    config["admin_token_file"] = str(config_file.parent / "secrets" / "admin-token")
    server = start_gateway(config, timeout=60)
    c.servers.append(server)
    return server


def _nodes(server: GatewayProcess, token: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return _llmgw("ctl", "--admin", server.admin_url, "--token", token, "nodes", *flags)


def _node_rows(server: GatewayProcess, token: str) -> dict[str, dict[str, Any]]:
    listed = _nodes(server, token, "--json")
    assert listed.returncode == 0, listed.stderr
    return {row["id"]: row for row in orjson.loads(listed.stdout)}


def test_init_then_two_nodes_register_and_a_removed_one_is_refused(tmp_path: Path) -> None:
    config_file = tmp_path / "llmgw.yaml"
    init = _llmgw("server", "init", "--config", str(config_file), "--name", "localhost", "--ip", "127.0.0.1")
    assert init.returncode == 0, init.stderr
    tls_dir = tmp_path / "tls"
    assert _mode(tls_dir) == 0o700
    for name in ("ca.crt", "ca.key", "server.crt", "server.key"):
        assert _mode(tls_dir / name) == 0o600, name
    token_file = tmp_path / "secrets" / "admin-token"
    assert _mode(token_file) == 0o600
    assert yaml.safe_load(config_file.read_text())["agent_tls"]["ca_file"] == str(tls_dir / "ca.crt")

    ca_before = (tls_dir / "ca.key").read_bytes()
    again = _llmgw("server", "init", "--config", str(config_file), "--name", "localhost")
    assert again.returncode == 2
    assert "already exists" in again.stderr
    assert "--force" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    assert (tls_dir / "ca.key").read_bytes() == ca_before

    for node in ("n1", "n2"):
        added = _llmgw("node", "add", node, "--config", str(config_file))
        assert added.returncode == 0, added.stderr
        for name in ("node.crt", "node.key", "ca.crt"):
            assert _mode(tls_dir / "nodes" / node / name) == 0o600, (node, name)

    with cluster(tmp_path) as c:
        server = _start_server(c, config_file)
        token = token_file.read_text().strip()
        for node in ("n1", "n2"):
            c.start_agent(node, tls=_bundle_args(tls_dir / "nodes" / node))

        def both_ready() -> dict[str, dict[str, Any]] | None:
            rows = _node_rows(server, token)
            ready = {n for n, row in rows.items() if row["status"] == "ready"}
            return rows if ready == {"n1", "n2"} else None

        rows = wait_for(both_ready, 60, "both nodes registered over mutual TLS\n" + c.logs())
        now = time.time()
        for node in ("n1", "n2"):
            # node add issues for one year: the end shown is the certificate's.
            assert now + YEAR_S - 86_400 < rows[node]["cert_not_after"] < now + YEAR_S + 86_400
        table = _nodes(server, token)
        assert time.strftime("%Y-%m-%d", time.gmtime(rows["n1"]["cert_not_after"])) in table.stdout

        removed = _llmgw("node", "remove", "n2", "--config", str(config_file))
        assert removed.returncode == 0, removed.stderr
        agent = c.agents["n2"]
        wait_for(
            lambda: "refused registration: revoked" in agent.log_path.read_text(errors="replace"),
            60,
            "n2 refused when it dialled again\n" + c.logs(),
        )
        rows = _node_rows(server, token)
        assert rows["n2"]["status"] != "ready"
        assert rows["n1"]["status"] == "ready"
        assert "node 'n2': its certificate" in server.log()

    unknown = _llmgw("node", "remove", "n3", "--config", str(config_file))
    assert unknown.returncode == 2
    assert "n3" in unknown.stderr

"""The admin commands as people type them, run as processes against a real `llmgw
server` with auth on, whose admin API listens on a free port (not the default 9090):
connection options before or after the sub-command, the address found through
`--config` or `LLMGW_ADMIN`, durations in days, and tables that fit 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from llmgw.testing.server import GatewayProcess, free_port, start_gateway

LLMGW = Path(sys.executable).with_name("llmgw")
ELLIPSIS = "…"


@dataclass
class Server:
    gateway: GatewayProcess
    workdir: Path

    @property
    def config(self) -> str:
        return str(self.gateway.config_path)

    def llmgw(self, *args: str, ok: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
        """`llmgw ARGS` in a directory of its own (no secrets/admin-token to fall back
        on), with no LLMGW_ variables but `env`'s, in an 80-column terminal."""
        clean = {k: v for k, v in os.environ.items() if not k.startswith("LLMGW_")}
        done = subprocess.run(
            [str(LLMGW), *args],
            capture_output=True,
            text=True,
            env={**clean, "COLUMNS": "80", **env},
            cwd=self.workdir,
            timeout=60,
            check=False,
        )
        assert (done.returncode == 0) == ok, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        return done


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    where = tmp_path_factory.mktemp("cli-connection")
    # No endpoints: the server is also a control plane, its agent port on loopback.
    config = {
        "auth": {"enabled": True, "store": str(where / "llmgw.db")},
        "agent_listen": f"127.0.0.1:{free_port()}",
        "agent_insecure": True,
    }
    gateway = start_gateway(config, timeout=60)
    try:
        assert not gateway.admin_url.endswith(":9090")
        workdir = where / "elsewhere"
        workdir.mkdir()
        s = Server(gateway, workdir)
        s.llmgw("orgs", "create", "acme", "--config", s.config)
        s.llmgw("teams", "create", "search", "--org", "acme", "--config", s.config)
        s.llmgw("projects", "create", "ranker", "--team", "search", "--config", s.config)
        yield s
    finally:
        gateway.stop()


def _key(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("llmgw-"))


def test_config_after_the_sub_command_finds_the_address_and_the_token(server: Server) -> None:
    made = server.llmgw("keys", "create", "--project", "ranker", "--config", server.config).stdout
    key_id = _key(made).split("-")[1]
    assert key_id in server.llmgw("keys", "list", "--config", server.config).stdout


def test_config_before_the_sub_command_does_too(server: Server) -> None:
    made = server.llmgw("keys", "--config", server.config, "create", "--project", "ranker").stdout
    assert _key(made)
    assert "ranker" in server.llmgw("projects", "--config", server.config, "list").stdout


def test_a_wildcard_admin_listen_is_dialled_on_this_machine(server: Server) -> None:
    """`:PORT` in the configuration: the command line dials 127.0.0.1:PORT."""
    settings = yaml.safe_load(server.gateway.config_path.read_text())
    port = settings["admin_listen"].rpartition(":")[2]
    token_file = server.gateway.config_path.parent / "secrets" / "admin-token"
    wildcard = server.workdir / "wildcard.yaml"
    wildcard.write_text(
        yaml.safe_dump(
            {"admin_listen": f":{port}", "admin_remote": True, "admin_token_file": str(token_file)}
        )
    )
    assert "acme" in server.llmgw("orgs", "list", "--config", str(wildcard)).stdout


def test_the_command_s_option_wins_over_the_group_s(server: Server) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    token = server.gateway.admin_token()
    listed = server.llmgw(
        "keys", "--admin", dead, "list", "--admin", server.gateway.admin_url, "--token", token
    )
    assert "keys" in listed.stdout
    refused = server.llmgw(
        "keys", "--admin", server.gateway.admin_url, "list", "--admin", dead, "--token", token, ok=False
    )
    assert refused.stderr.startswith(f"error: cannot reach the admin API at {dead}")


def test_llmgw_admin_is_the_address_when_no_option_gives_one(server: Server) -> None:
    token = server.gateway.admin_token()
    dead = f"http://127.0.0.1:{free_port()}"
    listed = server.llmgw("orgs", "list", LLMGW_ADMIN=server.gateway.admin_url, LLMGW_ADMIN_TOKEN=token)
    assert "acme" in listed.stdout
    # The option beats the environment, both ways round.
    assert (
        "acme"
        in server.llmgw(
            "orgs", "list", "--admin", server.gateway.admin_url, LLMGW_ADMIN=dead, LLMGW_ADMIN_TOKEN=token
        ).stdout
    )
    refused = server.llmgw(
        "orgs",
        "list",
        "--admin",
        dead,
        LLMGW_ADMIN=server.gateway.admin_url,
        LLMGW_ADMIN_TOKEN=token,
        ok=False,
    )
    assert refused.stderr.startswith(f"error: cannot reach the admin API at {dead}")
    # And the environment beats the configuration's admin_listen.
    refused = server.llmgw("orgs", "list", "--config", server.config, LLMGW_ADMIN=dead, ok=False)
    assert dead in refused.stderr


def test_a_configuration_that_does_not_load_is_one_line_with_status_2(server: Server) -> None:
    missing = server.workdir / "absent.yaml"
    refused = server.llmgw("keys", "list", "--config", str(missing), ok=False)
    assert refused.returncode == 2
    assert refused.stderr == f"error: --config {missing}: no such configuration file\n"
    broken = server.workdir / "broken.yaml"
    broken.write_text("router:\n  retries: -1\ncolour: red\n")
    refused = server.llmgw("usage", "--config", str(broken), ok=False)
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"error: --config {broken}: ")
    assert refused.stderr.count("\n") == 1
    assert f"llmgw config check {broken}" in refused.stderr


def test_usage_since_days(server: Server) -> None:
    shown = server.llmgw("usage", "--since", "7d", "--config", server.config).stdout
    assert "usage by project, last 7d" in shown
    refused = server.llmgw("usage", "--since", "7x", "--config", server.config, ok=False)
    assert refused.returncode == 2
    assert refused.stderr == "error: --since '7x' is not a duration: write it like 30m, 24h, 7d or 1d12h\n"


def test_a_key_lifetime_in_days(server: Server) -> None:
    made = server.llmgw(
        "keys", "create", "--project", "ranker", "--ttl", "2d", "--json", "--config", server.config
    )
    assert '"expires_at"' in made.stdout
    server.llmgw("keys", "ttl", "project", "ranker", "1d", "--config", server.config)
    refused = server.llmgw(
        "keys", "create", "--project", "ranker", "--ttl", "2d", "--config", server.config, ok=False
    )
    assert "24h" in refused.stderr  # the bound, as the server writes it
    server.llmgw("keys", "ttl", "project", "ranker", "none", "--config", server.config)


def _fits(output: str, headers: list[str]) -> None:
    """No line wider than 80 columns, nothing cut with an ellipsis, every header word there."""
    lines = output.splitlines()
    assert max(len(line) for line in lines) <= 80, output
    assert ELLIPSIS not in output, output
    for header in headers:
        for word in header.split():
            assert word in output, f"header {header!r} lost {word!r}:\n{output}"


def test_tables_fit_80_columns_and_wide_shows_every_value_whole(server: Server) -> None:
    long_name = "nightly-evaluation-of-the-ranking-model"
    server.llmgw(
        "keys", "create", "--project", "ranker", "--user", "", "--name", long_name, "--config", server.config
    )
    listed = server.llmgw("keys", "list", "--config", server.config).stdout
    _fits(listed, ["id", "name", "project", "user", "band", "rpm", "tpm", "expires", "state"])
    assert long_name not in listed  # folded onto several lines, not cut
    assert long_name[:6] in listed
    wide = server.llmgw("keys", "list", "--wide", "--config", server.config).stdout
    assert long_name in wide
    assert ELLIPSIS not in wide
    usage = server.llmgw("usage", "--config", server.config).stdout
    _fits(usage, ["project", "requests", "errors", "prompt tokens", "completion tokens", "cost"])
    projects = server.llmgw("projects", "list", "--config", server.config).stdout
    _fits(projects, ["id", "team", "budget period", "allowed models", "max key ttl", "gpu quota"])


@pytest.mark.parametrize(
    "command",
    [
        ["keys"],
        ["keys", "create"],
        ["keys", "list"],
        ["orgs", "create"],
        ["usage"],
        ["ctl", "nodes"],
        ["ctl", "model", "add"],
    ],
)
def test_help_fits_80_columns_and_names_the_connection_options_once(command: list[str]) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LLMGW_")}
    shown = subprocess.run(
        [str(LLMGW), *command, "--help"],
        capture_output=True,
        text=True,
        env={**clean, "COLUMNS": "80"},
        timeout=60,
        check=True,
    ).stdout
    assert max(len(line) for line in shown.splitlines()) <= 80
    for option in ("--admin", "--token-file", "--config"):
        assert shown.count(option + " ") == 1, shown
    assert "LLMGW_ADMIN" in shown

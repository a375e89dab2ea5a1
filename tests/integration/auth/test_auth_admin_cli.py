"""The admin API behind its token, and the command line over it, against a real
server process on loopback: tenancy, keys with their lifetimes, limits, budgets,
usage, and the refusals an operator can cause."""

from __future__ import annotations

import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from llmgw.cli.main import app
from llmgw.testing.server import free_port

SERVER = Path(__file__).with_name("admin_server.py")


class Admin:
    def __init__(self, url: str, token_file: Path) -> None:
        self.url = url
        self.token_file = token_file

    def cli(self, *args: str, ok: bool = True) -> str:
        group, *rest = args
        connect = [] if group == "usage" else ["--admin", self.url, "--token-file", str(self.token_file)]
        extra = ["--admin", self.url, "--token-file", str(self.token_file)] if group == "usage" else []
        result = CliRunner(env={"LLMGW_ADMIN_TOKEN": None}).invoke(app, [group, *connect, *rest, *extra])
        output = result.output + (result.stderr if result.stderr_bytes is not None else "")
        assert (result.exit_code == 0) == ok, output
        return output


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Admin]:
    where = tmp_path_factory.mktemp("admin")
    port = free_port()
    token_file = where / "secrets" / "admin-token"
    log = (where / "server.log").open("w")
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(where / "llmgw.db"), str(token_file), str(port)],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                urllib.request.urlopen(url + "/api/orgs", timeout=1)
            except urllib.error.HTTPError as answered:
                answered.close()
                break  # it answers (401 without the token)
            except OSError:
                assert time.monotonic() < deadline, "the admin server never answered"
                time.sleep(0.02)
        yield Admin(url, token_file)
    finally:
        process.terminate()
        process.communicate(timeout=10)
        log.close()


def test_the_token_file_is_made_0600_and_required(admin: Admin) -> None:
    assert stat.S_IMODE(admin.token_file.stat().st_mode) == 0o600
    for header in (None, "Bearer wrong"):
        request = urllib.request.Request(admin.url + "/api/orgs")
        if header:
            request.add_header("authorization", header)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 401
        refused.value.close()


def test_tenancy_keys_limits_budgets_and_usage_from_the_command_line(admin: Admin) -> None:
    admin.cli("orgs", "create", "acme", "--rpm", "100", "--max-key-ttl", "2h")
    admin.cli("teams", "create", "search", "--org", "acme", "--models", "m1,m2")
    admin.cli("projects", "create", "ranker", "--team", "search", "--budget", "5", "--period", "day")
    admin.cli("users", "create", "alice", "--email", "alice@example.com")
    assert "alice is a member of ranker" in admin.cli("users", "join", "alice", "ranker")
    assert "ranker" in admin.cli("projects", "list", "--team", "search")
    assert "acme" in admin.cli("orgs", "list")

    made = admin.cli("keys", "create", "--project", "ranker", "--name", "ci", "--ttl", "1h")
    key = next(line for line in made.splitlines() if line.startswith("llmgw-"))
    key_id = key.split("-")[1]
    assert key_id in admin.cli("keys", "list", "--project", "ranker")
    # Longer than the organisation allows, then than the project allows once bounded.
    assert "longer than this key may live" in admin.cli(
        "keys", "create", "--project", "ranker", "--ttl", "3h", ok=False
    )
    admin.cli("keys", "ttl", "project", "ranker", "30m")
    assert "30m" in admin.cli("keys", "create", "--project", "ranker", "--ttl", "1h", ok=False)
    personal = admin.cli("keys", "create", "--user", "alice")
    assert "alice" in personal

    assert "revoked key" in admin.cli("keys", "revoke", key_id)
    assert key_id not in admin.cli("keys", "list", "--project", "ranker")
    assert "revoked" in admin.cli("keys", "list", "--all")

    admin.cli("projects", "set", "ranker", "--tpm", "5000", "--clear", "budget")
    shown = admin.cli("projects", "show", "ranker", "--json")
    assert '"tpm": 5000' in shown
    assert '"budget": null' in shown
    assert "usage by project" in admin.cli("usage", "--by", "project", "--since", "1h")
    assert "409" in admin.cli("orgs", "delete", "acme", ok=False)  # its team is still there
    assert "400" in admin.cli("orgs", "create", "not ok!", ok=False)
    # Options of another level are refused, each saying what to leave out or give.
    assert "leave out --parent" in admin.cli("orgs", "create", "other", "--parent", "acme", ok=False)
    assert "give --team" in admin.cli("projects", "create", "orphan", ok=False)
    assert "leave out --email" in admin.cli(
        "teams", "create", "t", "--org", "acme", "--email", "x@y", ok=False
    )
    assert "a person owns no models" in admin.cli("users", "set", "alice", "--gpu-quota", "1", ok=False)
    assert "leave out --idp-group" in admin.cli("projects", "set", "ranker", "--idp-group", "G", ok=False)
    # A team follows an identity provider's group; one team a group.
    admin.cli("teams", "set", "search", "--idp-group", "Search Engineers")
    assert '"idp_group": "Search Engineers"' in admin.cli("teams", "show", "search", "--json")
    admin.cli("teams", "create", "other-team", "--org", "acme")
    assert "409" in admin.cli("teams", "set", "other-team", "--idp-group", "Search Engineers", ok=False)
    admin.cli("teams", "set", "search", "--clear", "idp_group")
    assert '"idp_group": null' in admin.cli("teams", "show", "search", "--json")
    assert "400" in admin.cli("usage", "--by", "colour", ok=False)


def test_the_admin_api_json(admin: Admin) -> None:
    import orjson

    token = admin.token_file.read_text().strip()

    def call(method: str, path: str, body: dict[str, object] | None = None) -> tuple[int, dict[str, Any]]:
        data = orjson.dumps(body) if body is not None else None
        request = urllib.request.Request(admin.url + path, data=data, method=method)
        request.add_header("authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return answer.status, orjson.loads(answer.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, orjson.loads(exc.read())

    assert call("POST", "/api/orgs", {"id": "json-org"})[0] == 201
    assert call("PUT", "/api/limits/org/json-org", {"rpm": 7})[1]["rpm"] == 7
    assert call("PUT", "/api/budgets/org/json-org", {"budget": 2.5, "period": "day"})[1]["budget"] == 2.5
    limits = call("GET", "/api/limits")[1]
    assert {"scope": "org:json-org", "rpm": 7, "tpm": None} in limits["data"]
    budgets = call("GET", "/api/budgets")[1]["data"]
    assert {"scope": "org:json-org", "budget": 2.5, "period": "day", "spent": 0.0} in budgets
    status, error = call("POST", "/api/orgs", {"id": "x", "colour": "red"})
    assert status == 400
    assert "colour" in error["error"]["message"]
    assert call("GET", "/api/nothing")[0] == 404
    assert call("GET", "/api/orgs/absent")[0] == 404
    assert call("PUT", "/api/orgs")[0] == 405
    status, error = call("POST", "/api/keys", {"project": "x", "user": "y"})
    assert status == 400
    assert "exactly one" in error["error"]["message"]

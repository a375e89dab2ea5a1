"""The control routes of the admin API and `llmgw ctl` over them, against a real server
process on loopback (a fake control plane, a real store and lease): listings, the
lease, model changes reaching the running plane at once, and refusals as one sentence
in OpenAI's error shape, and on the command line as one line with exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from llmgw.cli.main import app
from llmgw.core.yamlio import dump_yaml
from llmgw.testing.server import free_port
from support.control_store import CHAT, SMALL, Definition, definition

SERVER = Path(__file__).with_name("control_admin_server.py")
BIG: Definition = {
    "name": "big",
    "source": "meta-llama/Llama-3.1-70B-Instruct",
    "profiles": [{"name": "h100", "engine": "vllm", "gpu_class": "h100-80g", "tp": 4}],
    "scaling": {"min": 1, "max": 1},
}


@dataclass
class Admin:
    url: str
    token_file: Path
    where: Path

    def request(
        self, method: str, path: str, body: bytes | None = None, token: bool = True
    ) -> tuple[int, Any]:
        request = urllib.request.Request(self.url + path, data=body, method=method)
        if token:
            request.add_header("authorization", f"Bearer {self.token_file.read_text().strip()}")
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, orjson.loads(answer.read())
        except urllib.error.HTTPError as refused:
            with refused:
                return refused.code, orjson.loads(refused.read())

    def ctl(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLMGW_")}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "llmgw",
                "ctl",
                "--admin",
                self.url,
                "--token-file",
                str(self.token_file),
                *args,
            ],
            capture_output=True,
            text=True,
            env={**env, "COLUMNS": "200"},
            timeout=60,
            check=False,
        )
        assert (done.returncode == 0) == ok, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        return done

    def cli(self, *args: str) -> str:
        """`llmgw ctl` in this process, for the listings (a process costs seconds of imports)."""
        connect = ["--admin", self.url, "--token-file", str(self.token_file)]
        result = CliRunner(env={"LLMGW_ADMIN_TOKEN": None, "COLUMNS": "200"}).invoke(
            app, ["ctl", *connect, *args]
        )
        assert result.exit_code == 0, result.output
        return result.output

    def file(self, name: str, d: Definition) -> str:
        path = self.where / name
        path.write_text(dump_yaml(d))
        return str(path)


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Admin]:
    where = tmp_path_factory.mktemp("control-admin")
    config = where / "llmgw.yaml"
    config.write_text(dump_yaml({"control": {"lease_ttl": "5s"}, "models": [SMALL, CHAT]}))
    port = free_port()
    token_file = where / "secrets" / "admin-token"
    log = (where / "server.log").open("w")
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(where / "llmgw.db"), str(token_file), str(port), str(config)],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready", (where / "server.log").read_text()
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                urllib.request.urlopen(url + "/api/control/nodes", timeout=1)
            except urllib.error.HTTPError as answered:
                answered.close()
                break  # it answers (401 without the token)
            except OSError:
                assert time.monotonic() < deadline, "the admin server never answered"
                time.sleep(0.02)
        yield Admin(url, token_file, where)
    finally:
        process.terminate()
        process.communicate(timeout=10)
        log.close()


def test_the_routes_need_the_admin_token(admin: Admin) -> None:
    status, answer = admin.request("GET", "/api/control/nodes", token=False)
    assert status == 401
    assert answer["error"]["code"] == "invalid_admin_token"


def test_nodes_replicas_and_models_as_json(admin: Admin) -> None:
    status, nodes = admin.request("GET", "/api/control/nodes")
    assert status == 200
    [node] = nodes["data"]
    assert (node["id"], node["status"], node["gpus"], node["labels"]) == (
        "node-1",
        "ready",
        {"h100-80g": 1},
        {"rack": "r1"},
    )
    _, replicas = admin.request("GET", "/api/control/replicas")
    small = next(r for r in replicas["data"] if r["model"] == "small")
    assert small["assignments"] == [{"node": "node-1", "devices": ["0"], "cpu_cores": [0, 1]}]
    _, models = admin.request("GET", "/api/control/models")
    chat = next(m for m in models["data"] if m["name"] == "chat")
    assert (chat["origin"], chat["min"], chat["max"], chat["live"], chat["ready"]) == ("config", 1, 2, 1, 1)


def test_the_leader_route_shows_this_server_holding_the_lease(admin: Admin) -> None:
    status, lease = admin.request("GET", "/api/control/leader")
    assert status == 200
    assert lease["holder"] == lease["this_server"]
    assert lease["held"]
    assert lease["this_server_leads"]
    assert lease["term"] >= 1
    assert lease["ttl_s"] == 5.0
    assert 0 < lease["expires_in_s"] <= 5


def test_refusals_are_one_sentence_in_openais_shape(admin: Admin) -> None:
    bad = dump_yaml(definition(BIG, name="refused", scaling={"min": 3, "max": 1})).encode()
    status, answer = admin.request("POST", "/api/control/models", bad)
    assert status == 400
    assert answer["error"] == {
        "message": 'model "refused": scaling.max 1 is below scaling.min 3; raise max or lower min',
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_model",
    }
    status, answer = admin.request("POST", "/api/control/models/small/scale", b'{"max": 2}')
    assert (status, answer["error"]["message"]) == (400, "min: is required")
    status, answer = admin.request("GET", "/api/control/pods")
    assert (status, answer["error"]["code"]) == (404, "unknown_route")
    status, answer = admin.request("PATCH", "/api/control/models/small")
    assert status == 405
    status, answer = admin.request(
        "PUT", "/api/control/models/nope", dump_yaml(definition(BIG, name="nope")).encode()
    )
    assert (status, answer["error"]["code"]) == (404, "model_not_found")
    status, answer = admin.request("POST", "/api/control/models", dump_yaml(SMALL).encode())
    assert (status, answer["error"]["code"]) == (409, "model_exists")
    _, models = admin.request("GET", "/api/control/models")
    assert "refused" not in {m["name"] for m in models["data"]}


def test_ctl_lists_in_tables(admin: Admin) -> None:
    models = admin.cli("models")
    assert "small" in models
    assert "config" in models
    nodes = admin.cli("nodes")
    assert "node-1" in nodes
    assert "1 h100-80g" in nodes
    assert "rack=r1" in nodes
    assert "small-0" in admin.cli("replicas")
    leader = admin.cli("leader")
    assert "this server leads" in leader
    assert "True" in leader


def test_ctl_model_changes_reach_the_running_plane(admin: Admin) -> None:
    added = admin.ctl("model", "add", admin.file("big.yaml", BIG)).stdout
    assert added.strip() == "added model big: min 1, max 1"
    assert "big-0" in admin.cli("replicas"), "the plane got the new catalog at once"
    assert admin.ctl("explain", "big").stdout.strip() == "big: replica big-0 runs on 0 of node-1"
    edited = definition(BIG, description="seventy billion")
    assert admin.ctl("model", "edit", "big", admin.file("big2.yaml", edited)).stdout.startswith(
        "replaced model big"
    )
    assert admin.ctl("model", "scale", "big", "--min", "0", "--max", "3").stdout.strip() == (
        "scaled model big: min 0, max 3"
    )
    assert "big-0" not in admin.cli("replicas")
    _, models = admin.request("GET", "/api/control/models")
    big = next(m for m in models["data"] if m["name"] == "big")
    assert (big["origin"], big["min"], big["max"], big["updated_by"].count("@")) == ("store", 0, 3, 1)
    assert admin.ctl("model", "remove", "big").stdout.strip() == "removed model big"
    assert "big" not in admin.cli("models")


def test_ctl_refusals_are_one_line_with_status_2(admin: Admin) -> None:
    bad = admin.file("bad.yaml", definition(BIG, name="bad", profiles=[{"name": "cpu", "engine": "vllm"}]))
    done = admin.ctl("model", "add", bad, ok=False)
    assert done.returncode == 2
    assert done.stderr.startswith('error: 400: model "bad" profile "cpu": ')
    assert done.stderr.count("\n") == 1
    done = admin.ctl("model", "scale", "small", "--min", "4", "--max", "1", ok=False)
    assert done.stderr.strip() == (
        'error: 400: model "small": scaling.max 1 is below scaling.min 4; raise max or lower min'
    )
    done = admin.ctl("model", "remove", "ghost", ok=False)
    assert done.stderr.startswith('error: 404: model "ghost" is not in the catalog')
    done = admin.ctl("model", "add", str(admin.where / "missing.yaml"), ok=False)
    assert done.stderr.strip().endswith(
        "missing.yaml: no such file; give the path of the model's definition (YAML or JSON)"
    )
    assert done.returncode == 2
    done = admin.ctl("explain", "ghost", ok=False)
    assert done.returncode == 2


@pytest.mark.parametrize(
    "command",
    [
        ["models"],
        ["nodes"],
        ["replicas"],
        ["explain"],
        ["leader"],
        ["model", "add"],
        ["model", "edit"],
        ["model", "remove"],
        ["model", "scale"],
    ],
)
def test_every_ctl_command_has_help(command: list[str]) -> None:
    result = CliRunner().invoke(app, ["ctl", *command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: llmgw ctl" in result.output


def test_ctl_scale_without_its_options_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["ctl", "model", "scale", "small", "--min", "1"])
    assert result.exit_code == 2
    assert "--max" in result.output


def test_a_model_name_with_a_slash_works_on_every_route(admin: Admin) -> None:
    slashed = definition(BIG, name="org/chat-70b")
    status, _ = admin.request("POST", "/api/control/models", dump_yaml(slashed).encode())
    assert status == 201
    status, answer = admin.request("GET", "/api/control/models/org/chat-70b/explain")
    assert (status, answer["lines"]) == (200, ["org/chat-70b: replica org/chat-70b-0 runs on 0 of node-1"])
    scaled = admin.ctl("model", "scale", "org/chat-70b", "--min", "0", "--max", "2").stdout
    assert scaled.strip() == "scaled model org/chat-70b: min 0, max 2"
    status, _ = admin.request("PUT", "/api/control/models/org/chat-70b", dump_yaml(slashed).encode())
    assert status == 200
    status, answer = admin.request("DELETE", "/api/control/models/org/chat-70b")
    assert (status, answer["result"]) == (200, "removed")


def test_ctl_tables_fit_80_columns_and_wide_shows_every_value_whole(admin: Admin) -> None:
    """At COLUMNS=80 no header is cut and no line is wider; --wide adds who changed a
    model and when, each value on one line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMGW_")}
    connect = ["--admin", admin.url, "--token-file", str(admin.token_file)]

    def ctl(*args: str) -> str:
        done = subprocess.run(
            [str(Path(sys.executable).with_name("llmgw")), "ctl", *args, *connect],
            capture_output=True,
            text=True,
            env={**env, "COLUMNS": "80"},
            timeout=60,
            check=True,
        )
        return done.stdout

    headers = {
        "models": ["name", "origin", "class", "min", "max", "live", "ready", "replicas"],
        "nodes": ["id", "status", "hostname", "gpus", "cpu cores", "memory GB", "disk free GB", "labels"],
        "replicas": ["id", "model", "profile", "phase", "since", "nodes"],
    }
    for command, words in headers.items():
        shown = ctl(command)
        assert max(len(line) for line in shown.splitlines()) <= 80, shown
        assert "…" not in shown, shown
        for word in " ".join(words).split():
            assert word in shown, f"{command}: header word {word!r} lost:\n{shown}"
    assert "updated" not in ctl("models")
    status, _ = admin.request(
        "POST", "/api/control/models", dump_yaml(definition(BIG, name="wide-one")).encode()
    )
    assert status == 201
    try:
        wide = ctl("models", "--wide")
        assert "updated by" in wide
        _, models = admin.request("GET", "/api/control/models")
        [row] = [m for m in models["data"] if m["name"] == "wide-one"]
        assert row["updated_by"] in wide, wide  # whole, on one line
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(row["updated_at"])) + "Z"
        assert stamp in wide, wide
        assert "…" not in wide
    finally:
        admin.request("DELETE", "/api/control/models/wide-one")

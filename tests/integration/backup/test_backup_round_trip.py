"""`llmgw server backup` and `restore` as subprocesses around a real `llmgw server`: keys,
limits, usage and the runtime catalog made through the admin API, an archive encrypted
to an age recipient made here, the store wiped, restored, and the server started again
answers the same. On SQLite and on a PostgreSQL database of the test's own (real
`pg_dump` and `psql`). Bad input (no identity, the wrong one, a damaged archive, a
tampered member, a server still running) is one sentence, exit status 2, and the store
is left exactly as it was.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyrage
import pytest

from llmgw.backup.names import archive_time
from llmgw.testing.server import GatewayProcess, free_port, running_gateway
from llmgw.testing.sim import SimEngineProcess
from support.control_store import SMALL
from support.postgres import new_database
from support.sims import endpoint, sim

CHAT = {"model": "chat-a", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
WAIT_S = 20.0
REQUESTS = 3


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "chat-a")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "state" / "llmgw.db")
        return
    server: str = request.getfixturevalue("postgres_server")
    with new_database(server, prefix="llmgw_backup") as location:
        yield location


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMGW_")}
    done = subprocess.run(
        [sys.executable, "-m", "llmgw", "server", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def refused(done: subprocess.CompletedProcess[str], says: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


class Admin:
    def __init__(self, gateway: GatewayProcess, client: httpx.Client) -> None:
        self.gateway = gateway
        self.client = client
        self.headers = {"authorization": f"Bearer {gateway.admin_token()}"}

    def __call__(self, method: str, path: str, body: object = None) -> Any:
        answer = self.client.request(method, self.gateway.admin_url + path, json=body, headers=self.headers)
        assert answer.status_code < 300, answer.text
        return answer.json()

    def chat(self, key: str) -> int:
        answer = self.client.post(
            self.gateway.base_url + "/chat/completions", json=CHAT, headers={"authorization": f"Bearer {key}"}
        )
        return answer.status_code

    def state(self) -> dict[str, Any]:
        """What the round trip must keep: the project's limits, the usage, the catalog."""
        models = {row["name"]: row for row in self.control_models()}
        return {
            "project": self("GET", "/api/projects/p"),
            "keys": self("GET", "/api/keys")["data"],
            "usage": self("GET", "/api/usage/records?limit=100&since=1h")["data"],
            "small": models.get("small"),
        }

    def control_models(self) -> list[dict[str, Any]]:
        """The catalog, once the control plane (started after the listeners) is up."""
        deadline = time.monotonic() + WAIT_S
        while True:
            answer = self.client.get(self.gateway.admin_url + "/api/control/models", headers=self.headers)
            if answer.status_code != 404 or time.monotonic() > deadline:
                assert answer.status_code == 200, answer.text
                data: list[dict[str, Any]] = answer.json()["data"]
                return data
            time.sleep(0.05)

    def metric(self) -> float | None:
        for line in self.client.get(self.gateway.admin_url + "/metrics").text.splitlines():
            if line.startswith("llmgw_backup_last_success_timestamp_seconds "):
                return float(line.rsplit(" ", 1)[1])
        return None


def wait_for_usage(admin: Admin, count: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while len(admin("GET", "/api/usage/records?limit=100&since=1h")["data"]) < count:
        assert time.monotonic() < deadline, "the usage records never reached the store"
        time.sleep(0.05)


def fingerprint(store: str) -> str:
    """The SQLite file's bytes, or PostgreSQL's rows of llmgw's tables, as one digest."""
    if "://" not in store:
        path = Path(store)
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"
    dump = subprocess.run(
        ["pg_dump", "--data-only", store], capture_output=True, text=True, timeout=60, check=True
    )
    # pg_dump's \restrict line carries a key drawn afresh on every run.
    rows = [line for line in dump.stdout.splitlines() if not line.startswith(("\\restrict", "\\unrestrict"))]
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def wipe(store: str) -> None:
    if "://" not in store:
        Path(store).unlink()
        return
    subprocess.run(
        ["psql", "-X", "-q", store, "-c", "DROP SCHEMA public CASCADE; CREATE SCHEMA public;"],
        capture_output=True,
        timeout=60,
        check=True,
    )


def tampered(archive: Path, identity: pyrage.x25519.Identity, out: Path) -> Path:
    """The archive decrypted, with one byte of its store changed and its manifest kept."""
    plain = pyrage.decrypt(archive.read_bytes(), [identity])
    members: list[tuple[tarfile.TarInfo, bytes]] = []
    with tarfile.open(fileobj=io.BytesIO(plain), mode="r:gz") as tar:
        for info in tar:
            handle = tar.extractfile(info)
            assert handle is not None
            data = handle.read()
            if info.name.startswith("store/"):
                data = data[:-1] + bytes([data[-1] ^ 1])
            members.append((info, data))
    with tarfile.open(out, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data))
    return out


def test_back_up_wipe_restore_and_the_same_keys_limits_usage_and_catalog_answer(
    engine: SimEngineProcess, store: str, tmp_path: Path
) -> None:
    identity = pyrage.x25519.Identity.generate()
    key_file = tmp_path / "backup.key"
    key_file.write_text(f"# created: now\n{identity}\n")
    stranger = tmp_path / "stranger.key"
    stranger.write_text(f"{pyrage.x25519.Identity.generate()}\n")
    backups = tmp_path / "backups"
    config = {
        "auth": {"enabled": True, "store": store, "cache_ttl": "1s"},
        "endpoints": [endpoint("sim-1", engine, "chat-a")],
        "control": {"enabled": True},
        "agent_listen": f"127.0.0.1:{free_port()}",
        "agent_insecure": True,
        "firewall": {"enabled": False},
        "backup_dir": str(backups),
        "backup_recipients": [str(identity.to_public())],
    }
    with httpx.Client(timeout=10) as client:
        with running_gateway(config, timeout=90) as gateway:
            admin = Admin(gateway, client)
            admin("POST", "/api/orgs", {"id": "o"})
            admin("POST", "/api/teams", {"id": "t", "org": "o"})
            admin("POST", "/api/projects", {"id": "p", "team": "t", "rpm": 500, "tpm": 90000})
            key = admin("POST", "/api/keys", {"project": "p"})["key"]
            assert [admin.chat(key) for _ in range(REQUESTS)] == [200] * REQUESTS
            admin.control_models()
            admin("POST", "/api/control/models", SMALL)
            wait_for_usage(admin, REQUESTS)
            before = admin.state()
            assert before["small"] is not None
            assert admin.metric() is None  # no archive yet

            # While it runs: a backup is fine, a restore is refused.
            made = cli("backup", "--config", str(gateway.config_path))
            assert made.returncode == 0, made.stderr
            archive = Path(made.stdout.splitlines()[0])
            assert archive.parent == backups
            assert archive.name.endswith(".tar.gz.age")
            assert archive.stat().st_mode & 0o777 == 0o600
            assert admin.metric() == archive_time(archive.name)
            # Made after the backup: a restore would take it away.
            admin("POST", "/api/projects", {"id": "later", "team": "t"})
            refused(
                cli("restore", str(archive), "-c", str(gateway.config_path), "--identity", str(key_file)),
                "a server answers on admin_listen",
            )
            assert admin("GET", "/api/projects/later")["id"] == "later"
        config_file = gateway.config_path

        wipe(store)
        wiped = fingerprint(store)
        damaged = tmp_path / archive.name
        damaged.write_bytes(archive.read_bytes()[:-40] + bytes(40))
        for args, says in [
            ((str(archive),), "is encrypted: give --identity"),
            ((str(archive), "--identity", str(stranger)), "does not open with the --identity given"),
            ((str(damaged), "--identity", str(key_file)), "is damaged"),
            (
                (str(tampered(archive, identity, tmp_path / "tampered.tar.gz")),),
                "does not match its SHA-256 in the manifest",
            ),
        ]:
            refused(cli("restore", *args, "--config", str(config_file)), says)
            assert fingerprint(store) == wiped

        restored = cli("restore", str(archive), "--config", str(config_file), "--identity", str(key_file))
        assert restored.returncode == 0, restored.stderr
        assert "start the server now" in restored.stdout

        with running_gateway(config, timeout=90) as gateway:
            admin = Admin(gateway, client)
            assert admin.state() == before
            assert admin.chat(key) == 200
            assert admin.chat("sk-not-a-key") == 401

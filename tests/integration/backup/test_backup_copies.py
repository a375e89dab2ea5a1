"""`llmgw server backup` without a server: the cluster CA's files travel and come back
with their modes, an unencrypted archive is 0600, and copies land in a directory and on
a real SFTP server (asyncssh's, on loopback) whose host key is learnt the first time
and refused when it changes; the newest `backup_keep` are kept at every place."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import asyncssh
import pyrage
import pytest
import yaml

from llmgw.backup.names import archive_name
from llmgw.store import Store
from llmgw.testing.server import free_port

OLD = [archive_name(1_600_000_000 + day * 86_400, encrypted=True) for day in range(3)]
"""Archives from 2020, older than any this test writes."""


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


def new_store(path: Path) -> str:
    async def make() -> None:
        store = await Store.open(str(path))
        await store.close()

    asyncio.run(make())
    return str(path)


def write_config(where: Path, settings: dict[str, Any]) -> Path:
    config = where / "llmgw.yaml"
    port = free_port()
    base = {"listen": f"127.0.0.1:{port}", "admin_listen": f"127.0.0.1:{free_port()}", "agent_insecure": True}
    config.write_text(yaml.safe_dump({**base, **settings}))
    return config


def test_ca_files_come_back_with_their_modes_and_a_plain_archive_is_0600(tmp_path: Path) -> None:
    store = new_store(tmp_path / "state" / "llmgw.db")
    pki = tmp_path / "pki"
    pki.mkdir()
    files = {
        "ca_file": ("ca.pem", 0o644),
        "cert_file": ("server.pem", 0o644),
        "key_file": ("server.key", 0o600),
    }
    for role, (name, mode) in files.items():
        (pki / name).write_text(f"-----BEGIN {role}-----\n")
        (pki / name).chmod(mode)
    config = write_config(
        tmp_path,
        {
            "auth": {"enabled": True, "store": store},
            "backup_dir": str(tmp_path / "backups"),
            "agent_tls": {role: str(pki / name) for role, (name, _) in files.items()},
        },
    )
    made = cli("backup", "--config", str(config))
    assert made.returncode == 0, made.stderr
    archive = Path(made.stdout.splitlines()[0])
    assert archive.name.endswith(".tar.gz")  # no recipients: not encrypted
    assert archive.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "backups").stat().st_mode & 0o777 == 0o700

    for name, _ in files.values():
        (pki / name).unlink()
    Path(store).unlink()
    restored = cli("restore", str(archive), "--config", str(config))
    assert restored.returncode == 0, restored.stderr
    assert Path(store).is_file()
    for role, (name, mode) in files.items():
        assert (pki / name).read_text() == f"-----BEGIN {role}-----\n"
        assert (pki / name).stat().st_mode & 0o777 == mode


class SftpServer:
    """asyncssh's SSH server with SFTP chrooted to `root`, on a thread of its own."""

    def __init__(self, root: Path, client_key: asyncssh.SSHKey, port: int) -> None:
        self.root = root
        self.port = port
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self._authorized = asyncssh.import_authorized_keys(client_key.export_public_key().decode())
        self._loop = asyncio.new_event_loop()
        self._server: asyncssh.SSHAcceptor | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> SftpServer:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        self._server = future.result(timeout=30)
        return self

    async def _start(self) -> asyncssh.SSHAcceptor:
        return await asyncssh.create_server(
            asyncssh.SSHServer,
            "127.0.0.1",
            self.port,
            server_host_keys=[self.host_key],
            authorized_client_keys=self._authorized,
            sftp_factory=lambda chan: asyncssh.SFTPServer(chan, chroot=str(self.root).encode()),
        )

    def stop(self) -> None:
        server = self._server
        if server is not None:
            server.close()
            asyncio.run_coroutine_threadsafe(server.wait_closed(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()


@pytest.fixture
def client_key(tmp_path: Path) -> tuple[asyncssh.SSHKey, Path]:
    key = asyncssh.generate_private_key("ssh-ed25519")
    path = tmp_path / "backup_copy_key"
    key.write_private_key(str(path))
    path.chmod(0o600)
    return key, path


def test_copies_go_to_a_directory_and_over_sftp_learning_the_host_and_keeping_the_newest(
    tmp_path: Path, client_key: tuple[asyncssh.SSHKey, Path]
) -> None:
    store = new_store(tmp_path / "state" / "llmgw.db")
    identity = pyrage.x25519.Identity.generate()
    remote = tmp_path / "remote"
    share = tmp_path / "share"
    local = tmp_path / "backups"
    for place in (remote / "srv" / "llmgw", share, local):
        place.mkdir(parents=True)
        for name in OLD:
            (place / name).write_bytes(b"old")
    port = free_port()
    config_dir = tmp_path / "etc"
    config_dir.mkdir()
    config = write_config(
        config_dir,
        {
            "auth": {"enabled": True, "store": store},
            "backup_dir": str(local),
            "backup_keep": 2,
            "backup_recipients": [str(identity.to_public())],
            "backup_copy_to": [str(share), f"ssh://backup@127.0.0.1:{port}/srv/llmgw"],
            "backup_copy_key": str(client_key[1]),
        },
    )
    known_hosts = config_dir / "backup_known_hosts"
    server = SftpServer(remote, client_key[0], port).start()
    try:
        made = cli("backup", "--config", str(config))
        assert made.returncode == 0, made.stderr
        archive = Path(made.stdout.splitlines()[0])
        assert f"copied to ssh://backup@127.0.0.1:{port}/srv/llmgw" in made.stdout
        expected = sorted([archive.name, OLD[-1]])
        for place in (local, share, remote / "srv" / "llmgw"):
            assert sorted(os.listdir(place)) == expected, place
        assert (share / archive.name).read_bytes() == archive.read_bytes()
        assert (remote / "srv" / "llmgw" / archive.name).read_bytes() == archive.read_bytes()
        learnt = known_hosts.read_text().split()
        assert learnt[0] == f"[127.0.0.1]:{port}"
        assert learnt[2] == server.host_key.export_public_key().decode().split()[1]
        # Known now, the host is checked against its line and let through.
        again = cli("backup", "--config", str(config))
        assert again.returncode == 0, again.stderr
        assert f"copied to ssh://backup@127.0.0.1:{port}/srv/llmgw" in again.stdout
        assert len(known_hosts.read_text().splitlines()) == 1
    finally:
        server.stop()

    # The same address with another host key: refused, naming the known-hosts file.
    impostor = SftpServer(remote, client_key[0], port).start()
    try:
        done = cli("backup", "--config", str(config))
        assert done.returncode == 2
        assert "the host's key is not the one in" in done.stderr
        assert str(known_hosts) in done.stderr
    finally:
        impostor.stop()

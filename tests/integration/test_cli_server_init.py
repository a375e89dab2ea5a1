"""`llmgw server init` and `llmgw node add` as an operator runs them, apart from a running
server: without a configuration the files go under ./tls and the agent_tls block to paste
is printed; a configuration that already names its files is used as it is, and a --dir
elsewhere is refused in one sentence; a node name unfit for a certificate is refused."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import yaml


def _llmgw(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMGW_") and k != "STATE_DIRECTORY"}
    return subprocess.run(
        [sys.executable, "-m", "llmgw", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=env,
        check=False,
    )


def test_without_a_configuration_the_block_to_paste_is_printed(tmp_path: Path) -> None:
    made = _llmgw(tmp_path, "server", "init", "--ip", "10.0.0.1")
    assert made.returncode == 0, made.stderr
    assert "agent_tls:\n" in made.stdout
    assert f"ca_file: {tmp_path / 'tls' / 'ca.crt'}" in made.stdout
    assert stat.S_IMODE((tmp_path / "tls" / "ca.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "secrets" / "admin-token").stat().st_mode) == 0o600


def test_a_configuration_naming_its_files_is_used_and_another_dir_refused(tmp_path: Path) -> None:
    config = tmp_path / "llmgw.yaml"
    tls = tmp_path / "pki"
    text = (
        "# kept as written\nagent_listen: :7443\nagent_tls:\n"
        f"  cert_file: {tls}/server.crt\n  key_file: {tls}/server.key\n  ca_file: {tls}/ca.crt\n"
    )
    config.write_text(text)
    elsewhere = _llmgw(tmp_path, "server", "init", "--config", str(config), "--name", "gw", "--dir", "other")
    assert elsewhere.returncode == 2
    assert elsewhere.stderr.count("\n") == 1
    assert "--dir other" in elsewhere.stderr
    assert not (tmp_path / "other").exists()

    made = _llmgw(tmp_path, "server", "init", "--config", str(config), "--name", "gw")
    assert made.returncode == 0, made.stderr
    assert config.read_text() == text
    assert (tls / "ca.key").is_file()
    assert (tls / "server.crt").is_file()

    bad = _llmgw(tmp_path, "node", "add", "gpu_01", "--config", str(config))
    assert bad.returncode == 2
    assert "node name 'gpu_01'" in bad.stderr
    added = _llmgw(tmp_path, "node", "add", "gpu-01", "--config", str(config), "--out", "bundle")
    assert added.returncode == 0, added.stderr
    assert sorted(p.name for p in (tmp_path / "bundle").iterdir()) == ["ca.crt", "node.crt", "node.key"]
    assert yaml.safe_load(config.read_text())["agent_tls"]["ca_file"] == f"{tls}/ca.crt"

"""The `sim-engine` command: every option documented, bad values refused in one sentence."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

OPTIONS = (
    "--port", "--host", "--model", "--adapter", "--flavor", "--seed", "--max-seqs", "--block-size",
    "--kv-blocks", "--prefill-ms-per-token", "--decode-ms", "--decode-ms-per-seq", "--time-scale",
    "--max-model-len", "--default-max-tokens", "--embedding-dim", "--prompt-tokens-details",
    "--legacy-metrics", "--startup-delay", "--fault", "--fault-after", "--fault-stream-tokens",
    "--hang-seconds", "--admin-port", "--max-recent",
)  # fmt: skip


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "300", "NO_COLOR": "1", "TERM": "dumb"}
    return subprocess.run(  # bounded: each of these exits at once
        [sys.executable, *args], capture_output=True, text=True, timeout=30, env=env, check=False
    )


def test_python_m_llmgw_sim_help_documents_every_option() -> None:
    result = run("-m", "llmgw.cli.sim", "--help")
    assert result.returncode == 0, result.stderr
    for option in OPTIONS:
        assert option in result.stdout, option
    for mode in ("none", "refuse", "hang-headers", "hang-stream", "cut-stream", "exit-after"):
        assert mode in result.stdout, mode


def test_llmgw_sim_engine_help() -> None:
    result = run("-m", "llmgw", "sim-engine", "--help")
    if result.returncode != 0 and "ImportError" in result.stderr + result.stdout:
        pytest.skip("the llmgw command does not import yet (another part of llmgw is unfinished)")
    assert result.returncode == 0, result.stderr
    assert "--kv-blocks" in result.stdout


def test_a_bad_value_is_one_sentence_naming_the_option_and_the_fix() -> None:
    result = run("-m", "llmgw.cli.sim", "--kv-blocks", "4", "--max-model-len", "1024")
    assert result.returncode == 2
    assert "kv_blocks" in result.stderr
    assert "at least 64" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_port_in_use_is_one_sentence() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("-m", "llmgw.cli.sim", "--port", str(port))
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr

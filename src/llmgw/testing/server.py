"""Starting `llmgw server` as a subprocess on free loopback ports, for tests and
benchmarks: write the configuration, start it, poll `/readyz`, stop it by PID."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from llmgw.testing.sim import http_status

_POLL_S = 0.02


def free_port() -> int:
    """A TCP port nothing listens on right now on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class GatewayProcess:
    """A running `llmgw server`."""

    process: subprocess.Popen[bytes]
    url: str
    admin_url: str
    config_path: Path
    log_path: Path

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def admin_token(self) -> str:
        """The admin token the server made at start, in its default place beside the
        configuration (for a configuration that does not set `admin_token_file`)."""
        return (self.config_path.parent / "secrets" / "admin-token").read_text().strip()

    def stop(self, timeout: float = 10.0) -> int:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout)
        return self.process.returncode


def start_gateway(
    config: Mapping[str, Any],
    *,
    timeout: float = 20.0,
    env: Mapping[str, str] | None = None,
    log_level: str = "warning",
    args: Sequence[str] = (),
) -> GatewayProcess:
    """Starts `llmgw server` on `config` with `listen` and `admin_listen` set to free
    loopback ports, logging at `log_level` with `args` added to its command line (like
    `--log-format json`); returns once `/readyz` answers 200."""
    port, admin_port = free_port(), free_port()
    settings = {**config, "listen": f"127.0.0.1:{port}", "admin_listen": f"127.0.0.1:{admin_port}"}
    workdir = Path(tempfile.mkdtemp(prefix="llmgw-gw-"))
    config_path = workdir / "llmgw.yaml"
    config_path.write_text(yaml.safe_dump(settings, sort_keys=False))
    log_path = workdir / "server.log"
    clean_env = {k: v for k, v in (env or os.environ).items() if not k.startswith("LLMGW_")}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llmgw",
                "server",
                "--config",
                str(config_path),
                "--log-level",
                log_level,
                *args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=clean_env,
        )
    handle = GatewayProcess(
        process, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{admin_port}", config_path, log_path
    )
    deadline = time.monotonic() + timeout
    while http_status(handle.admin_url + "/readyz") != 200:
        if process.poll() is not None or time.monotonic() > deadline:
            handle.stop()
            raise RuntimeError(f"llmgw server did not become ready:\n{handle.log()}")
        time.sleep(_POLL_S)
    return handle


@contextlib.contextmanager
def running_gateway(
    config: Mapping[str, Any], *, timeout: float = 20.0, log_level: str = "warning", args: Sequence[str] = ()
) -> Iterator[GatewayProcess]:
    handle = start_gateway(config, timeout=timeout, log_level=log_level, args=args)
    try:
        yield handle
    finally:
        handle.stop()

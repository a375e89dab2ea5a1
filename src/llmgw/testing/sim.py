"""Starting sim engines as subprocesses, for this and every other test suite.

`start_sim_engine("--flavor", "llamacpp", ...)` runs `python -m llmgw.cli.sim --port 0
--admin-port 0 ...`, reads the ports from the line the sim prints, polls `/health`
until it answers 200 (never sleeping a fixed time), and returns a handle with the URLs.
`handle.stop()` ends it by its PID (SIGTERM, then SIGKILL after a bound). Use it as a
context manager, or through `running_sim_engine`, so a failing test cannot leak it.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import selectors
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType

from llmgw.sim.runner import READY_PREFIX

_LINE = re.compile(rf"^{READY_PREFIX} url=(\S+) admin_url=(\S+) flavor=(\S+) pid=(\d+)$")
_POLL_S = 0.02


class SimStartError(RuntimeError):
    """The sim did not start, or did not become ready, in time."""


@dataclass
class SimEngineProcess:
    """A sim engine running as a child process."""

    process: subprocess.Popen[str]
    url: str
    admin_url: str
    flavor: str

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.process.pid

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (`.../v1`), as clients take it."""
        return self.url + "/v1"

    def poll(self) -> int | None:
        """The exit status if it has ended, else None."""
        return self.process.poll()

    def wait_exit(self, timeout: float) -> int:
        """Wait for the process to end on its own; its exit status."""
        return self.process.wait(timeout)

    def stop(self, timeout: float = 5.0) -> int:
        """End the process by PID: SIGTERM, then SIGKILL if it outlives `timeout`."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode

    def __enter__(self) -> SimEngineProcess:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def http_status(url: str, timeout: float = 1.0) -> int | None:
    """The status of `GET url`, or None when nothing answers."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
    try:
        connection.request("GET", parts.path or "/")
        response = connection.getresponse()
        response.read()
        return response.status
    except OSError:
        return None
    finally:
        connection.close()


def wait_until_ready(url: str, timeout: float) -> None:
    """Poll `url/health` until it answers 200; SimStartError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        status = http_status(url + "/health")
        if status == 200:
            return
        if time.monotonic() >= deadline:
            raise SimStartError(f"{url}/health did not answer 200 within {timeout}s (last: {status})")
        time.sleep(_POLL_S)


def _read_ready_line(process: subprocess.Popen[str], timeout: float) -> re.Match[str]:
    stdout = process.stdout
    if stdout is None:
        raise SimStartError("the sim's stdout is not piped")
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SimStartError(f"the sim printed no ready line within {timeout}s")
            if not selector.select(left):
                continue
            line = stdout.readline()
            if not line:
                raise SimStartError(f"the sim exited before listening (status {process.wait(timeout)})")
            match = _LINE.match(line.strip())
            if match:
                return match


def start_sim_engine(
    *args: str,
    wait_ready: bool = True,
    timeout: float = 20.0,
    env: Mapping[str, str] | None = None,
) -> SimEngineProcess:
    """Start `python -m llmgw.cli.sim --port 0 --admin-port 0 *args`; ready unless `wait_ready=False`."""
    command = [sys.executable, "-m", "llmgw.cli.sim", "--port", "0", "--admin-port", "0", *args]
    process = subprocess.Popen(  # the sim prints one line on stdout; its logs go to stderr
        command,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=dict(env) if env is not None else None,
    )
    handle: SimEngineProcess | None = None
    try:
        match = _read_ready_line(process, timeout)
        handle = SimEngineProcess(process=process, url=match[1], admin_url=match[2], flavor=match[3])
        if wait_ready:
            wait_until_ready(handle.url, timeout)
    except BaseException:
        if handle is None:
            handle = SimEngineProcess(process=process, url="", admin_url="", flavor="")
        handle.stop()
        raise
    return handle


@contextlib.contextmanager
def running_sim_engine(
    *args: str, wait_ready: bool = True, timeout: float = 20.0
) -> Iterator[SimEngineProcess]:
    """`start_sim_engine` as a context manager that always stops the process."""
    with start_sim_engine(*args, wait_ready=wait_ready, timeout=timeout) as handle:
        yield handle

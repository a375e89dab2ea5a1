"""Processes the overhead benchmark starts, and what it reads about them.

Each process is started pinned to one core (`taskset -c`), with its output in a log
file, and remembered by PID. Stopping one signals that PID and the descendants it
spawned (found by walking /proc at that moment), never anything matched by name: other
people's servers run on the same machine. CPU time is read from /proc/PID/stat
(utime + stime of the process and its live descendants, plus the cutime + cstime of
children it has already reaped), so a multi-process gateway is charged for all of it.

Also here: the per-core busy time from /proc/stat, to tell how much of the gateway's
core other people's work took during a run, and small HTTP checks against 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
# Variables that would send a child's loopback traffic through a proxy, or configure
# llmgw from the caller's shell instead of from the benchmark's file.
_SCRUBBED_PREFIXES = ("LLMGW_",)
_SCRUBBED_NAMES = frozenset(
    name.lower() for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "REQUESTS_CA_BUNDLE")
)


class StartError(RuntimeError):
    """A process did not become ready; the message says why, with its log's tail."""


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces: split after the last one.
    return raw[raw.rfind(")") + 2 :].split()


def descendants(root: int) -> list[int]:
    """`root`'s live descendants, found by walking /proc now."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    frontier = [root]
    while frontier and len(found) < 10_000:
        pid = frontier.pop()
        for child in children.get(pid, ()):
            found.append(child)
            frontier.append(child)
    return found


def _identity(pid: int) -> tuple[int, str] | None:
    """(pid, start time): a PID alone may be reused once its process is gone."""
    fields = _stat_fields(pid)
    return None if fields is None else (pid, fields[19])


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds used so far by `root`, its live descendants and its reaped children."""
    ticks = 0
    for n, pid in enumerate([root, *descendants(root)]):
        fields = _stat_fields(pid)
        if fields is None:
            continue
        ticks += int(fields[11]) + int(fields[12])
        if n == 0:
            ticks += int(fields[13]) + int(fields[14])
    return ticks / CLK_TCK


def core_times(core: int) -> tuple[float, float]:
    """(busy, total) seconds of one core since boot, from /proc/stat."""
    label = f"cpu{core}"
    for line in Path("/proc/stat").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == label:
            user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in parts[1:9])
            busy = user + nice + system + irq + softirq + steal
            return busy / CLK_TCK, (busy + idle + iowait) / CLK_TCK
    raise ValueError(f"/proc/stat has no {label} line")


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(_SCRUBBED_PREFIXES) and k.lower() not in _SCRUBBED_NAMES
    }
    env.update(extra)
    return env


class Proc:
    """One started process, pinned to a core, logging to a file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        core: int,
        log_path: Path,
        env: Mapping[str, str],
        cwd: Path,
    ) -> None:
        self.name = name
        self.argv = ["taskset", "-c", str(core), *argv]
        self.log_path = log_path
        with log_path.open("ab") as log:
            log.write(f"# {' '.join(self.argv)}\n".encode())
            log.flush()
            # taskset execs the command, so the PID is the command's own.
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env(env),
                cwd=cwd,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def exit_code(self) -> int | None:
        return self.popen.poll()

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.pid)

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM the process, then SIGKILL what is left of it and its descendants."""
        if self.popen.poll() is not None:
            return
        family = [i for pid in descendants(self.pid) if (i := _identity(pid))]
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            family += [i for pid in descendants(self.pid) if (i := _identity(pid))]
            os.kill(self.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)
        for pid, started in family:
            # A descendant that outlived the process is still ours to stop; a process
            # that has since taken its PID is not, and its start time tells them apart.
            if _identity(pid) == (pid, started):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


BENCH_KEY = "llmgw-benchkey-overhead-benchmark-fixed-secret-not-for-use-anywhere-else"
"""The API key every request carries: the llmgw-auth target's (auth_setup.py puts it in
its store; chat.lua sends the same), which the other targets ignore."""


def post(port: int, body: bytes, timeout_s: float = 30.0) -> tuple[int, str, bytes]:
    """(status, content type, body) of POST /v1/chat/completions on 127.0.0.1:port."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {BENCH_KEY}"},
        )
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type") or "", resp.read()
    finally:
        conn.close()


def check_chat(port: int, stream: bool) -> str:
    """Empty when a chat request through `port` answers as the upstream would; else why not."""
    body: dict[str, object] = {
        "model": "bench-model",
        "messages": [{"role": "user", "content": "Say something short."}],
        "max_tokens": 18,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    try:
        status, ctype, data = post(port, json.dumps(body).encode())
    except (OSError, http.client.HTTPException) as exc:
        return f"{type(exc).__name__}: {exc}"
    if status != 200:
        return f"status {status}: {data[:300]!r}"
    if not stream:
        try:
            content = json.loads(data)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return f"not a chat.completion: {data[:300]!r}"
        return "" if content else "empty message content"
    events = [line for line in data.decode(errors="replace").splitlines() if line.startswith("data:")]
    if "text/event-stream" not in ctype:
        return f"content type {ctype!r}, not text/event-stream"
    if not events or events[-1].strip() != "data: [DONE]":
        return f"stream does not end with data: [DONE] ({len(events)} events)"
    if not any("chat.completion.chunk" in e for e in events):
        return "no chat.completion.chunk event in the stream"
    return ""


def wait_ready(proc: Proc | None, port: int, timeout_s: float) -> float:
    """Polls until a chat request through `port` answers; returns the seconds it took."""
    start = time.monotonic()
    deadline = start + timeout_s
    last = "no answer yet"
    while time.monotonic() < deadline:
        if proc is not None and (code := proc.exit_code()) is not None:
            raise StartError(f"exited with status {code} before answering.\n{proc.log_tail()}")
        last = check_chat(port, stream=False) if port_accepts(port) else "port not listening yet"
        if not last:
            return time.monotonic() - start
        time.sleep(0.25)
    tail = proc.log_tail() if proc is not None else ""
    raise StartError(f"not ready after {timeout_s:.0f}s: {last}\n{tail}")


def port_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False

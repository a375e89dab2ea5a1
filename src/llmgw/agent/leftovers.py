"""What llmgw left running on a machine, found from what it recorded, for `llmgw wipe`.

Only processes llmgw started and recorded are ever signalled: the agent holding its
state directory's lock (the lock file names its PID, and a held lock proves it lives),
and each engine whose replica record names its PID and start time (a later process
given the same PID is told apart by its start time and left alone).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llmgw.agent.state import StateDir, is_same_process, read_proc_stat

LOCK_NAME = "agent.lock"
"""The agent's lock file in its state directory (as `llmgw agent` takes it)."""


@dataclass(frozen=True)
class Recorded:
    """A live process llmgw recorded starting."""

    pid: int
    start_ticks: int
    group: bool
    """Signal its whole process group (an engine and its children)."""
    what: str


def recorded_processes(agent_state: Path) -> list[Recorded]:
    """The agent and the engines the state directory records, those alive now; the
    agent first, so it starts nothing new while its engines are stopped."""
    found: list[Recorded] = []
    agent_pid = _lock_holder(agent_state / LOCK_NAME)
    stat = read_proc_stat(agent_pid) if agent_pid else None
    if agent_pid and stat is not None:
        found.append(Recorded(agent_pid, stat.start_ticks, group=False, what="llmgw agent"))
    if (agent_state / "replicas").is_dir():
        for record in StateDir(agent_state).load_all():
            if is_same_process(record.pid, record.start_ticks):
                what = f"engine {record.engine} of replica {record.replica_id} ({record.model})"
                found.append(
                    Recorded(record.pid, record.start_ticks, group=record.pgid == record.pid, what=what)
                )
    return found


def _lock_holder(lock: Path) -> int:
    """The PID in a lock file that some process holds; 0 where none holds it."""
    try:
        handle = lock.open("r")
    except OSError:
        return 0
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = handle.read().strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(handle, fcntl.LOCK_UN)
        return 0


def stop(
    process: Recorded,
    *,
    grace_s: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> bool:
    """SIGTERM, then SIGKILL after `grace_s` if it still runs; True once it is gone (or
    no longer the recorded process)."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        if not is_same_process(process.pid, process.start_ticks):
            return True
        with contextlib.suppress(ProcessLookupError):
            if process.group:
                os.killpg(process.pid, sig)
            else:
                os.kill(process.pid, sig)
        deadline = monotonic() + wait_s
        while monotonic() < deadline:
            _reap(process.pid)
            if not is_same_process(process.pid, process.start_ticks):
                return True
            sleep(0.05)
    return not is_same_process(process.pid, process.start_ticks)


def _reap(pid: int) -> None:
    """Collects the exit of a process that is this one's own child, so it does not stay
    a zombie (which `is_same_process` already counts as gone)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)

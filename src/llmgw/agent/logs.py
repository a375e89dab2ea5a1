"""Each engine's log: its stdout and stderr in one file under the replica's directory,
rotated by size, and the tail the agent sends when the engine fails or crashes.

The engine writes the file itself (opened with O_APPEND and handed to it as stdout and
stderr), rather than through a pipe the agent reads: an engine writing into a pipe
would get SIGPIPE, and die, the moment its agent restarts, and surviving an agent
restart is the point of adopting replicas. Rotation is therefore copy-then-truncate, as
logrotate's `copytruncate`: the agent copies the file to `engine.log.1` (shifting the
older ones) and truncates it, and the engine's next append lands at the new end. Lines
written between the copy and the truncation are lost; that window is a few
milliseconds once per `max_bytes`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

TAIL_READ_BYTES = 64 * 1024
"""How much of the end of a log is read for its tail: forty lines of even a verbose
engine fit, and a corrupt multi-gigabyte log is never read whole."""


@dataclass(frozen=True)
class LogPolicy:
    """When an engine log is rotated, and how many old ones are kept."""

    max_bytes: int = 20 * 1024 * 1024
    keep: int = 3
    """Rotated files kept: engine.log.1 (newest) to engine.log.<keep>."""


def rotated(path: Path, n: int) -> Path:
    """The n-th rotated file of `path` (1 is the newest)."""
    return path.with_name(f"{path.name}.{n}")


def open_for_engine(path: Path) -> int:
    """A file descriptor the engine writes its output to, appending."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)


def rotate_if_needed(path: Path, policy: LogPolicy) -> bool:
    """Rotates `path` once it has reached `policy.max_bytes`; whether it did."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return False
    if size < policy.max_bytes:
        return False
    if policy.keep <= 0:
        os.truncate(path, 0)
        return True
    with contextlib.suppress(FileNotFoundError):
        rotated(path, policy.keep).unlink()
    for n in range(policy.keep - 1, 0, -1):
        with contextlib.suppress(FileNotFoundError):
            os.replace(rotated(path, n), rotated(path, n + 1))
    shutil.copyfile(path, rotated(path, 1))
    os.truncate(path, 0)
    return True


def tail_lines(data: bytes, count: int) -> tuple[str, ...]:
    """The last `count` lines of `data`, decoded leniently (an engine may write any
    bytes), without line ends. A first line cut by the read window is dropped by the
    caller, which knows whether the window started mid-file."""
    if count <= 0:
        return ()
    lines = data.decode("utf-8", errors="replace").splitlines()
    return tuple(lines[-count:])


def _read_end(path: Path, limit: int) -> tuple[bytes, bool]:
    """The last `limit` bytes of the file and whether that is the whole file."""
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        start = max(0, size - limit)
        handle.seek(start)
        return handle.read(limit), start == 0


def read_tail(path: Path, count: int) -> tuple[str, ...]:
    """The last `count` lines of the log, reaching into the newest rotated file when the
    current one, just truncated, holds fewer."""
    lines: list[str] = []
    for candidate in (path, rotated(path, 1)):
        try:
            data, whole = _read_end(candidate, TAIL_READ_BYTES)
        except FileNotFoundError:
            continue
        found = list(tail_lines(data, count + 1))
        if not whole and found:
            found = found[1:]  # the window began mid-line
        lines = found + lines
        if len(lines) >= count:
            break
    return tuple(lines[-count:])

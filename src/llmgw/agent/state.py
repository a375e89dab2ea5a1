"""The agent's state directory: one record per replica it started, so that an agent that
restarts finds its engines again and adopts them instead of starting them anew.

    <state_dir>/replicas/<replica_id>/replica.json   the record (written atomically)
    <state_dir>/replicas/<replica_id>/engine.log     the engine's output, rotated
    <state_dir>/weights/                             fetched weights (`weights`)
    <state_dir>/term                                 the highest leader term obeyed

A record names the process by its PID *and* its start time in clock ticks since boot
(field 22 of /proc/<pid>/stat): a PID is reused once its process is gone, and only the
pair tells the engine from a stranger that later got its number.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pydantic

from llmgw.core.durations import Duration
from llmgw.core.strict import Strict
from llmgw.errors import ReplicaError

log = logging.getLogger(__name__)

RECORD_NAME = "replica.json"
TERM_NAME = "term"
LOG_NAME = "engine.log"
_REPLICA_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_replica_id(replica_id: str) -> str:
    """The id, when it can name a directory; ReplicaError otherwise. The control plane
    chooses ids, and one with '/' or '..' must not reach the file system."""
    if not _REPLICA_ID.match(replica_id):
        raise ReplicaError(
            f"replica id {replica_id!r} is refused: use up to 128 letters, digits, '.', '_' or '-',"
            " starting with a letter or digit"
        )
    return replica_id


class ReplicaRecord(Strict):
    """What the agent keeps about a replica process it started."""

    replica_id: str
    model: str
    profile: str
    engine: str
    pid: int
    pgid: int
    start_ticks: int
    """The process's start time (/proc/<pid>/stat field 22), which tells it from a later
    process given the same PID."""
    port: int
    ports: tuple[int, ...] = ()
    """Every port it holds, the HTTP one among them."""
    url: str
    health_url: str
    metrics_url: str = ""
    argv: tuple[str, ...]
    cpu_cores: tuple[int, ...] = ()
    startup_timeout: Duration
    stop_grace: Duration
    kill_after_grace: bool = True
    started_at: datetime
    ready: bool = False
    """Whether it has answered its health check once; an adopted replica that had not
    goes on waiting for the rest of its startup_timeout."""

    @property
    def stop_grace_s(self) -> float:
        return self.stop_grace / timedelta(seconds=1)


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/<pid>/stat the agent reads."""

    state: str
    pgid: int
    start_ticks: int


def parse_proc_stat(text: str) -> ProcStat:
    """Fields of /proc/<pid>/stat's text. The command name (field 2) is in parentheses
    and may itself hold spaces and parentheses, so the fields are counted from the last
    ')'. ValueError for a text that is not such a line."""
    close = text.rfind(")")
    if close < 0:
        raise ValueError("no command name in parentheses")
    rest = text[close + 1 :].split()
    # rest[0] is field 3 (state), so field N is rest[N - 3].
    if len(rest) < 20:
        raise ValueError(f"{len(rest) + 2} fields, 22 or more expected")
    return ProcStat(state=rest[0], pgid=int(rest[2]), start_ticks=int(rest[19]))


def read_proc_stat(pid: int, proc: Path = Path("/proc")) -> ProcStat | None:
    """The process's stat, or None when there is no such process."""
    try:
        return parse_proc_stat((proc / str(pid) / "stat").read_text())
    except (OSError, ValueError):
        return None


def is_same_process(pid: int, start_ticks: int, proc: Path = Path("/proc")) -> bool:
    """Whether `pid` is still the process that started at `start_ticks`, and not a zombie
    (which has ended and only waits for its parent to read its status)."""
    stat = read_proc_stat(pid, proc)
    return stat is not None and stat.start_ticks == start_ticks and stat.state not in ("Z", "X")


class StateDir:
    """The replicas' directories under the agent's state directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.replicas = root / "replicas"
        self.weights = root / "weights"
        self.term_path = root / TERM_NAME

    def create(self) -> None:
        self.replicas.mkdir(parents=True, exist_ok=True)
        self.weights.mkdir(parents=True, exist_ok=True)

    def replica_dir(self, replica_id: str) -> Path:
        return self.replicas / check_replica_id(replica_id)

    def log_path(self, replica_id: str) -> Path:
        return self.replica_dir(replica_id) / LOG_NAME

    def record_path(self, replica_id: str) -> Path:
        return self.replica_dir(replica_id) / RECORD_NAME

    def save(self, record: ReplicaRecord) -> None:
        """Writes the record so that a crash mid-write leaves the old one or the new one,
        never half of either."""
        path = self.record_path(record.replica_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        # Readable by the agent alone: it names the engine's ports and command line.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(record.model_dump_json(indent=2))
        os.replace(temporary, path)

    def load_all(self) -> list[ReplicaRecord]:
        """Every readable record. One that cannot be read is logged and left where it is
        for a person to look at: guessing at it could kill an unrelated process."""
        out: list[ReplicaRecord] = []
        if not self.replicas.is_dir():
            return out
        for path in sorted(self.replicas.glob(f"*/{RECORD_NAME}")):
            try:
                out.append(ReplicaRecord.model_validate_json(path.read_text()))
            except (OSError, pydantic.ValidationError) as exc:
                log.warning("replica record %s cannot be read, ignoring it: %s", path, exc)
        return out

    def forget(self, replica_id: str) -> None:
        """Removes the record: the process is gone. The log stays for a person to read."""
        with contextlib.suppress(FileNotFoundError):
            self.record_path(replica_id).unlink()

    def remove(self, replica_id: str) -> None:
        """Removes the replica's directory, log included."""
        shutil.rmtree(self.replica_dir(replica_id), ignore_errors=True)


class TermFence:
    """The highest leader term whose orders this agent obeyed, kept in the state
    directory so a restarted agent still refuses a deposed leader.

    Control planes sharing a store take turns leading; each leadership has a term that
    only grows (docs/control-plane-ha.md). An order stamped with a lower term than one
    already obeyed comes from a leader that was deposed while it decided (a long pause,
    a partition): obeying it could start a second replica for a slot its successor has
    filled. Term 0 is an order from a control plane without a lease, which has no rival
    and is never refused."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.highest = self._load()

    def _load(self) -> int:
        try:
            return max(int(self.path.read_text().strip() or "0"), 0)
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as exc:
            # Written atomically, so this is a file someone edited; the next order with
            # a term writes it again.
            log.warning("leader term file %s cannot be read, starting from term 0: %s", self.path, exc)
            return 0

    def admit(self, term: int) -> bool:
        """Whether an order stamped `term` may be obeyed; a higher term than any seen
        is written down before the order is acted upon."""
        if term <= 0:
            return True
        if term < self.highest:
            return False
        if term > self.highest:
            self.highest = term
            self._save(term)
        return True

    def _save(self, term: int) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_suffix(".tmp")
            temporary.write_text(f"{term}\n")
            os.replace(temporary, self.path)
        except OSError as exc:
            # Still fenced in memory; only a restart before the next write forgets it.
            log.warning("leader term %d could not be written to %s: %s", term, self.path, exc)

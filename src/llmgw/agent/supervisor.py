"""Engine supervision: starting a replica's process, knowing when it is ready, noticing
when it ends, stopping it, and finding it again after the agent itself restarts.

- Start: the process runs in a session (and so a process group) of its own, with the
  agent's environment less its `LLMGW_` names plus the launch's (which sets
  CUDA_VISIBLE_DEVICES), its CPU affinity set before it executes (so every thread and
  child inherits it), its output appended to its log, and a record in the state
  directory.
- Ready: its health endpoint answers 200 within the profile's startup_timeout; else it
  is stopped and reported failed, with its log's tail.
- Ended: a process that exits without being asked is reported (crashed once it was
  ready, failed before), with its exit status and log tail, and what is left of its
  process group is killed. It is never restarted here: restarting is the control
  plane's decision, and a crash loop is something a person must see.
- Stop: drained first when asked (until its metrics show nothing running or queued,
  within the drain time), then SIGTERM to the group, then SIGKILL once the launch's
  grace is over, since llama-server waits on a running request however long it takes.
- Adopt: at start, every record whose process is still the same (PID and start time)
  is taken back as it was; one whose process is gone is reported crashed.

State changes go to `on_change`, one `ReplicaState` at a time, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp

from llmgw.agent import logs
from llmgw.agent.ports import PortProbe, allocate_ports, port_is_free, reserve_cores
from llmgw.agent.readiness import wait_idle, wait_ready
from llmgw.agent.state import ReplicaRecord, StateDir, is_same_process, read_proc_stat
from llmgw.engines.launch import Launch
from llmgw.engines.metrics import NAMES_BY_ENGINE, MetricNames
from llmgw.errors import ReplicaError
from llmgw.protocol.messages import LOG_TAIL_LINES, ReplicaState, ReplicaStatus

log = logging.getLogger(__name__)

KILL_WAIT_S = 10.0
"""How long a SIGKILLed group may take to be gone before the agent stops waiting."""
MONITOR_INTERVAL_S = 0.25
"""How often the agent looks whether its engines still run."""
STOP_POLL_S = 0.05
"""How often a stop looks whether the process has ended."""
ROTATE_EVERY = 20
"""Log sizes are checked every this many monitor passes (five seconds by default)."""


SECRET_FLAGS = ("--api-key", "--api_key")
"""Flags whose value is a secret: an engine that takes its key only on the command line
(SGLang) gets it there, and the agent's log, the engine log's first line and the
replica record show *** instead."""


def shown_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """The command line as the agent writes it down, secrets replaced."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        flag, sep, _ = arg.partition("=")
        if hide_next:
            out.append("***")
        elif sep and flag in SECRET_FLAGS:
            out.append(f"{flag}=***")
        else:
            out.append(arg)
        hide_next = arg in SECRET_FLAGS
    return tuple(out)


def clean_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The agent's environment as an engine inherits it: without llmgw's own settings,
    which may carry secrets and mean nothing to an engine."""
    return {key: value for key, value in environ.items() if not key.upper().startswith("LLMGW_")}


@dataclass
class Replica:
    """One replica as the supervisor tracks it."""

    replica_id: str
    model: str
    profile: str
    engine: str
    status: ReplicaStatus = ReplicaStatus.STARTING
    detail: str = ""
    record: ReplicaRecord | None = None
    process: subprocess.Popen[bytes] | None = None
    """The process when this agent started it; None when adopted (not its child)."""
    log_path: Path | None = None
    log_tail: tuple[str, ...] = ()
    exit_code: int | None = None
    end_as: ReplicaStatus | None = None
    """What the process ending means when the agent itself ended it."""
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def report(self) -> ReplicaState:
        record = self.record
        return ReplicaState(
            replica_id=self.replica_id,
            model=self.model,
            profile=self.profile,
            engine=self.engine,
            state=self.status,
            url=record.url if record else "",
            pid=record.pid if record else 0,
            port=record.port if record else 0,
            detail=self.detail,
            log_tail=self.log_tail,
            exit_code=self.exit_code,
        )


@dataclass(frozen=True)
class Spawned:
    """A started process and what identifies it."""

    process: subprocess.Popen[bytes]
    start_ticks: int


def spawn(launch: Launch, log_path: Path, cwd: Path, base_env: Mapping[str, str]) -> Spawned:
    """Starts the launch's process in a new session, its output appended to `log_path`.
    Raises ReplicaError when the program cannot be run."""
    env = {**base_env, **launch.env}
    fd = logs.open_for_engine(log_path)
    cores = tuple(launch.cpu_affinity)
    try:
        banner = f"--- llmgw agent {datetime.now(UTC).isoformat()}: {' '.join(shown_argv(launch.argv))}\n"
        os.write(fd, banner.encode())
        cwd.mkdir(parents=True, exist_ok=True)
        # The affinity is set between fork and exec: the engine's threads and children
        # inherit it, where setting it afterwards would miss threads already started.
        # sched_setaffinity is a bare system call, safe in a forked child of a threaded
        # process.
        preexec = (lambda: os.sched_setaffinity(0, cores)) if cores else None
        process = subprocess.Popen(
            list(launch.argv),
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(launch.cwd or cwd),
            start_new_session=True,
            preexec_fn=preexec,  # noqa: PLW1509 - see above
        )
    except (FileNotFoundError, PermissionError) as exc:
        raise ReplicaError(
            f"engine {launch.engine}: {launch.argv[0]} cannot be run on this node ({exc.strerror});"
            " install the engine or give the agent its path"
        ) from exc
    except OSError as exc:
        raise ReplicaError(f"engine {launch.engine}: starting {launch.argv[0]} failed: {exc}") from exc
    finally:
        os.close(fd)
    stat = read_proc_stat(process.pid)
    return Spawned(process, stat.start_ticks if stat else 0)


class Supervisor:
    """The replicas of this agent, their processes and their records."""

    def __init__(
        self,
        state: StateDir,
        session: aiohttp.ClientSession,
        *,
        port_range: tuple[int, int],
        on_change: Callable[[ReplicaState], None],
        log_policy: logs.LogPolicy | None = None,
        base_env: Mapping[str, str] | None = None,
        is_port_free: PortProbe = port_is_free,
        available_cores: Callable[[], Iterable[int]] = lambda: os.sched_getaffinity(0),
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        proc: Path = Path("/proc"),
        monitor_interval_s: float = MONITOR_INTERVAL_S,
        rotate_every: int = ROTATE_EVERY,
    ) -> None:
        self.state = state
        self.session = session
        self.port_range = port_range
        self.on_change = on_change
        self.log_policy = log_policy or logs.LogPolicy()
        self.base_env = clean_environment(os.environ if base_env is None else base_env)
        self.is_port_free = is_port_free
        self.available_cores = available_cores
        self.wall_clock = wall_clock
        self.proc = proc
        self.monitor_interval_s = monitor_interval_s
        self.rotate_every = max(rotate_every, 1)
        self.replicas: dict[str, Replica] = {}
        self._monitor: asyncio.Task[None] | None = None
        self._passes = 0

    # --- what the agent reports -------------------------------------------------------

    def reports(self) -> tuple[ReplicaState, ...]:
        """Every replica's state, running ones first."""
        ordered = sorted(self.replicas.values(), key=lambda r: (r.status.ended, r.replica_id))
        return tuple(r.report() for r in ordered)

    def get(self, replica_id: str) -> Replica | None:
        return self.replicas.get(replica_id)

    def _live(self) -> list[Replica]:
        return [r for r in self.replicas.values() if not r.status.ended]

    def _set(self, replica: Replica, status: ReplicaStatus, detail: str = "") -> None:
        if replica.status.ended:
            return  # an end is final; a late observer must not overwrite it
        replica.status = status
        replica.detail = detail
        if status.ended:
            replica.ended.set()
        self.on_change(replica.report())

    # --- life cycle of the supervisor -------------------------------------------------

    async def start(self) -> None:
        """Adopts what the state directory records, then watches every process."""
        self.state.create()
        for record in self.state.load_all():
            self._adopt(record)
        self._monitor = asyncio.create_task(self._watch(), name="llmgw-agent-monitor")

    @property
    def running(self) -> bool:
        """Whether it watches its engines (between `start` and `close`)."""
        return self._monitor is not None and not self._monitor.done()

    async def close(self) -> None:
        """Stops watching. The engines keep running: a restarted agent adopts them."""
        tasks = [t for t in (self._monitor, *(r.task for r in self.replicas.values())) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _adopt(self, record: ReplicaRecord) -> None:
        replica = Replica(
            replica_id=record.replica_id,
            model=record.model,
            profile=record.profile,
            engine=record.engine,
            record=record,
            log_path=self.state.log_path(record.replica_id),
        )
        self.replicas[record.replica_id] = replica
        replica.status = ReplicaStatus.READY if record.ready else ReplicaStatus.STARTING
        if not is_same_process(record.pid, record.start_ticks, self.proc):
            self._kill_group_remnants(record)
            self._record_end(replica, "the engine ended while its agent was not running")
            return
        if record.ready:
            log.info("replica %s: adopted, pid %d, %s", record.replica_id, record.pid, record.url)
            return
        waited = self.wall_clock() - record.started_at
        left = max(record.startup_timeout - waited, timedelta(0))
        log.info("replica %s: adopted while loading, pid %d", record.replica_id, record.pid)
        replica.task = asyncio.create_task(self._await_ready(replica, left / timedelta(seconds=1)))

    # --- starting -------------------------------------------------------------------

    def begin(self, replica_id: str, model: str, profile: str, engine: str, detail: str = "") -> Replica:
        """Takes on a replica before its process exists (its weights are being fetched),
        so that it is reported, and a second order for it is not a second replica."""
        self.state.replica_dir(replica_id)  # refuses an id that cannot name a directory
        replica = Replica(replica_id=replica_id, model=model, profile=profile, engine=engine)
        replica.log_path = self.state.log_path(replica_id)
        self.replicas[replica_id] = replica
        self._set(replica, ReplicaStatus.STARTING, detail)
        return replica

    def held_ports(self) -> set[int]:
        return {port for r in self._live() if r.record for port in r.record.ports}

    def held_cores(self) -> set[int]:
        return {core for r in self._live() if r.record for core in r.record.cpu_cores}

    def choose_ports(self, count: int) -> tuple[int, ...]:
        return allocate_ports(self.port_range, count, self.held_ports(), self.is_port_free)

    def choose_cores(self, count: int) -> tuple[int, ...]:
        return reserve_cores(self.available_cores(), count, self.held_cores())

    def launch(self, replica: Replica, launch: Launch, *, ports: Collection[int], url: str) -> None:
        """Starts the process of a replica taken on with `begin`, and waits for it to be
        ready in the background. ReplicaError when it cannot be started."""
        if replica.status.ended:
            return  # stopped while its weights were fetched
        replica_dir = self.state.replica_dir(replica.replica_id)
        log_path = self.state.log_path(replica.replica_id)
        spawned = spawn(launch, log_path, replica_dir, self.base_env)
        health = url + launch.health_path if launch.serves_http and launch.health_path else ""
        record = ReplicaRecord(
            replica_id=replica.replica_id,
            model=replica.model,
            profile=replica.profile,
            engine=launch.engine,
            pid=spawned.process.pid,
            pgid=spawned.process.pid,  # a new session's leader leads its process group
            start_ticks=spawned.start_ticks,
            port=next(iter(ports), 0),
            ports=tuple(ports),
            url=url if launch.serves_http else "",
            health_url=health,
            metrics_url=url + launch.metrics_path if launch.serves_http and launch.metrics_path else "",
            argv=shown_argv(launch.argv),
            cpu_cores=launch.cpu_affinity,
            startup_timeout=launch.startup_timeout,
            stop_grace=launch.stop_grace,
            kill_after_grace=launch.kill_after_grace,
            started_at=self.wall_clock(),
        )
        replica.process = spawned.process
        replica.record = record
        replica.log_path = log_path
        self.state.save(record)
        log.info("replica %s: started pid %d: %s", replica.replica_id, record.pid, " ".join(record.argv))
        self._set(replica, ReplicaStatus.STARTING, launch.ready or "loading")
        timeout_s = launch.startup_timeout / timedelta(seconds=1)
        replica.task = asyncio.create_task(self._await_ready(replica, timeout_s))

    def fail(self, replica: Replica, detail: str) -> None:
        """Ends a replica that could not be started (weights, ports, launch refused)."""
        if replica.log_path is not None and replica.log_path.exists():
            replica.log_tail = logs.read_tail(replica.log_path, LOG_TAIL_LINES)
        self._set(replica, ReplicaStatus.FAILED, detail)

    async def _await_ready(self, replica: Replica, timeout_s: float) -> None:
        record = replica.record
        assert record is not None
        if not record.health_url:
            # A worker node of a multi-node replica: its health is its first node's.
            self._mark_ready(replica)
            return
        outcome = await wait_ready(self.session, record.health_url, timeout_s, lambda: self._alive(replica))
        if outcome.ready:
            self._mark_ready(replica)
        elif self._alive(replica):
            replica.end_as = ReplicaStatus.FAILED
            replica.detail = outcome.detail
            await self._terminate(replica)
        # An exit while loading is the monitor's to report: it reads the exit status.

    def _mark_ready(self, replica: Replica) -> None:
        if replica.record is None or replica.status != ReplicaStatus.STARTING:
            return
        replica.record = replica.record.model_copy(update={"ready": True})
        self.state.save(replica.record)
        log.info("replica %s: ready at %s", replica.replica_id, replica.record.url)
        self._set(replica, ReplicaStatus.READY)

    # --- watching -------------------------------------------------------------------

    def _alive(self, replica: Replica) -> bool:
        """Whether the process runs, without collecting its exit status (the monitor does,
        after killing what is left of its group)."""
        process, record = replica.process, replica.record
        if record is None:
            return False
        if process is None:
            return is_same_process(record.pid, record.start_ticks, self.proc)
        if process.returncode is not None:
            return False
        try:
            return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        except ChildProcessError:
            return False

    async def _watch(self) -> None:
        while True:
            self.check()
            await asyncio.sleep(self.monitor_interval_s)

    def check(self) -> None:
        """One look at every process: ends are reported, large logs rotated."""
        self._passes += 1
        for replica in self._live():
            if replica.record is None:
                continue
            if not self._alive(replica):
                self._collect(replica)
            elif self._passes % self.rotate_every == 0 and replica.log_path is not None:
                logs.rotate_if_needed(replica.log_path, self.log_policy)

    def _collect(self, replica: Replica) -> None:
        """The process has exited: kill the rest of its group, read its status, report."""
        record = replica.record
        assert record is not None
        if replica.process is not None:
            # The unreaped leader still holds its PID, so the group's number cannot have
            # been given to anyone else yet.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(record.pgid, signal.SIGKILL)
            replica.exit_code = replica.process.wait()
        else:
            self._kill_group_remnants(record)
        self._record_end(replica, self._end_detail(replica))

    def _end_detail(self, replica: Replica) -> str:
        code = replica.exit_code
        how = "" if code is None else (f" (signal {-code})" if code < 0 else f" (exit status {code})")
        if replica.end_as == ReplicaStatus.STOPPED:
            return f"stopped{how}"
        if replica.end_as == ReplicaStatus.FAILED:
            return replica.detail
        if replica.status == ReplicaStatus.STARTING:
            return f"the engine exited while loading{how}"
        return f"the engine exited unasked{how}"

    def _record_end(self, replica: Replica, detail: str) -> None:
        if replica.end_as == ReplicaStatus.STOPPED:
            status = ReplicaStatus.STOPPED
        elif replica.end_as == ReplicaStatus.FAILED or replica.status == ReplicaStatus.STARTING:
            status = ReplicaStatus.FAILED
        else:
            status = ReplicaStatus.CRASHED
        if status != ReplicaStatus.STOPPED and replica.log_path is not None:
            replica.log_tail = logs.read_tail(replica.log_path, LOG_TAIL_LINES)
        self.state.forget(replica.replica_id)
        if status == ReplicaStatus.STOPPED:
            log.info("replica %s: %s", replica.replica_id, detail)
        else:
            log.warning("replica %s: %s: %s", replica.replica_id, status, detail)
        self._set(replica, status, detail)

    def _kill_group_remnants(self, record: ReplicaRecord) -> None:
        """Kills processes left in an adopted engine's group. They are found by group and
        start time, since the group's number may by now belong to someone else."""
        for pid in group_members(record.pgid, record.start_ticks, self.proc):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    # --- stopping -------------------------------------------------------------------

    async def stop(self, replica_id: str, drain: timedelta = timedelta(0)) -> None:
        """Stops a replica (draining it first for up to `drain`); forgets an ended one."""
        replica = self.replicas.get(replica_id)
        if replica is None:
            return
        if replica.status.ended:
            del self.replicas[replica_id]
            return
        if replica.task is not None and replica.status == ReplicaStatus.STARTING:
            replica.task.cancel()
        replica.end_as = ReplicaStatus.STOPPED
        if replica.record is None:
            self._set(replica, ReplicaStatus.STOPPED, "stopped before its engine was started")
            return
        self._set(replica, ReplicaStatus.STOPPING, "draining" if drain > timedelta(0) else "stopping")
        record = replica.record
        if drain > timedelta(0) and record.metrics_url:
            names: MetricNames = NAMES_BY_ENGINE.get(record.engine, NAMES_BY_ENGINE[""])
            idle = await wait_idle(self.session, record.metrics_url, names, drain / timedelta(seconds=1))
            log.info("replica %s: drain %s", replica_id, "done" if idle else "ended by its time limit")
        await self._terminate(replica)

    async def _terminate(self, replica: Replica) -> None:
        """SIGTERM to the group, SIGKILL after the grace; returns once the monitor has
        seen the end, or KILL_WAIT_S after SIGKILL."""
        record = replica.record
        assert record is not None
        self._signal_group(replica, signal.SIGTERM)
        if await self._ended_within(replica, record.stop_grace_s):
            return
        if not record.kill_after_grace:
            log.warning("replica %s: past its grace; its launch asks not to kill it", record.replica_id)
            return
        log.warning("replica %s: running %gs after SIGTERM: SIGKILL", record.replica_id, record.stop_grace_s)
        self._signal_group(replica, signal.SIGKILL)
        await self._ended_within(replica, KILL_WAIT_S)

    async def _ended_within(self, replica: Replica, timeout_s: float) -> bool:
        """Whether the process ends within `timeout_s`. It looks for itself rather than
        waiting on the monitor, so that a stop completes even with the monitor gone."""
        deadline = time.monotonic() + timeout_s
        while not replica.ended.is_set():
            if replica.record is not None and not self._alive(replica):
                self._collect(replica)
                break
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(STOP_POLL_S, left))
        return True

    def _signal_group(self, replica: Replica, sig: signal.Signals) -> None:
        record = replica.record
        if record is None or not self._alive(replica):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(record.pgid, sig)


def group_members(pgid: int, since_ticks: int, proc: Path = Path("/proc")) -> list[int]:
    """PIDs in process group `pgid` that started no earlier than `since_ticks`: the
    engine's own children, and not a later group that reused the number."""
    out: list[int] = []
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        stat = read_proc_stat(int(entry.name), proc)
        if stat is not None and stat.pgid == pgid and stat.start_ticks >= since_ticks:
            out.append(int(entry.name))
    return out

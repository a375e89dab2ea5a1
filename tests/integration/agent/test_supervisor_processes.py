"""The supervisor with real processes, in this test's own event loop: SIGKILL after the
grace for an engine that ignores SIGTERM, the rest of a process group killed when its
leader dies, logs rotated while the engine writes, and adoption by a new supervisor of
a live engine and of a dead one's orphans."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import aiohttp
from agent_helpers import pid_alive

from llmgw.agent.logs import LogPolicy, rotated
from llmgw.agent.state import StateDir
from llmgw.agent.supervisor import Supervisor
from llmgw.engines.launch import Launch
from llmgw.engines.load import NAMES_BY_ENGINE
from llmgw.protocol.messages import ReplicaState, ReplicaStatus
from llmgw.testing.server import free_port

STUB = Path(__file__).parent / "engine_stub.py"
WAIT_S = 30.0


def stub_launch(port: int, *, stop_grace_s: float = 5.0, **env: str) -> Launch:
    return Launch(
        engine="llamacpp",
        argv=(sys.executable, str(STUB), "--port", str(port)),
        env=env,
        metric_names=NAMES_BY_ENGINE["llamacpp"],
        metric_prefix="llamacpp:",
        startup_timeout=timedelta(seconds=WAIT_S),
        stop_grace=timedelta(seconds=stop_grace_s),
    )


class Recorder:
    """Collects the supervisor's reports and lets a test wait for one."""

    def __init__(self) -> None:
        self.states: list[ReplicaState] = []
        self.changed = asyncio.Event()

    def __call__(self, state: ReplicaState) -> None:
        self.states.append(state)
        self.changed.set()

    async def wait(self, replica_id: str, *wanted: ReplicaStatus) -> ReplicaState:
        deadline = time.monotonic() + WAIT_S
        while True:
            for state in reversed(self.states):
                if state.replica_id == replica_id:
                    if state.state in wanted:
                        return state
                    break
            self.changed.clear()
            left = deadline - time.monotonic()
            assert left > 0, f"{replica_id} not {wanted}: {self.states}"
            await asyncio.wait_for(self.changed.wait(), left)


def run(tmp_path: Path, test: Callable[[Callable[..., Supervisor], Recorder], Awaitable[None]]) -> None:
    """Runs `test` with a factory of supervisors over one state directory."""

    async def main() -> None:
        recorder = Recorder()
        made: list[Supervisor] = []
        async with aiohttp.ClientSession() as session:

            def supervisor(**options: object) -> Supervisor:
                made.append(
                    Supervisor(
                        StateDir(tmp_path / "state"),
                        session,
                        port_range=(21000, 21999),
                        on_change=recorder,
                        monitor_interval_s=0.05,
                        **options,  # type: ignore[arg-type]
                    )
                )
                return made[-1]

            try:
                await test(supervisor, recorder)
            finally:
                for each in (s for s in made if s.running):
                    for replica in list(each.replicas.values()):
                        if not replica.status.ended and replica.record is not None:
                            await each.stop(replica.replica_id)
                    await each.close()

    asyncio.run(main())


def _child_pid(log: Path) -> int:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = re.search(r"child=(\d+)", log.read_text() if log.exists() else "")
        if found:
            return int(found.group(1))
    raise AssertionError("the stub never printed its child")


def _launch(supervisor: Supervisor, replica_id: str, launch: Launch, port: int) -> None:
    replica = supervisor.begin(replica_id, "m", "p", launch.engine)
    supervisor.launch(replica, launch, ports=(port,), url=f"http://127.0.0.1:{port}")


def test_an_engine_deaf_to_sigterm_is_killed_after_its_grace(tmp_path: Path) -> None:
    async def test(make: Callable[..., Supervisor], seen: Recorder) -> None:
        supervisor = make()
        await supervisor.start()
        port = free_port()
        _launch(supervisor, "deaf", stub_launch(port, stop_grace_s=1.0, STUB_IGNORE_TERM="1"), port)
        ready = await seen.wait("deaf", ReplicaStatus.READY, ReplicaStatus.FAILED)
        assert ready.state == ReplicaStatus.READY, ready
        began = time.monotonic()
        await supervisor.stop("deaf")
        took = time.monotonic() - began
        stopped = await seen.wait("deaf", ReplicaStatus.STOPPED)
        assert stopped.exit_code == -signal.SIGKILL
        assert "signal 9" in stopped.detail
        assert took >= 1.0, took  # the grace was given before the kill
        assert not pid_alive(ready.pid)

    run(tmp_path, test)


def test_a_dead_leader_takes_its_process_group_with_it(tmp_path: Path) -> None:
    async def test(make: Callable[..., Supervisor], seen: Recorder) -> None:
        supervisor = make()
        await supervisor.start()
        port = free_port()
        _launch(supervisor, "family", stub_launch(port, STUB_CHILD="1", STUB_EXIT_AFTER_S="1"), port)
        child = _child_pid(tmp_path / "state" / "replicas" / "family" / "engine.log")
        assert pid_alive(child)
        ended = await seen.wait("family", ReplicaStatus.CRASHED, ReplicaStatus.FAILED)
        assert ended.exit_code == 3
        assert any("exiting in 1s" in line for line in ended.log_tail), ended.log_tail
        deadline = time.monotonic() + WAIT_S
        while pid_alive(child):
            assert time.monotonic() < deadline, "the engine's child outlived it"
            await asyncio.sleep(0.05)

    run(tmp_path, test)


def test_logs_are_rotated_while_the_engine_runs(tmp_path: Path) -> None:
    async def test(make: Callable[..., Supervisor], seen: Recorder) -> None:
        supervisor = make(log_policy=LogPolicy(max_bytes=20_000, keep=2), rotate_every=1)
        await supervisor.start()
        port = free_port()
        _launch(supervisor, "chatty", stub_launch(port, STUB_LINES="2000"), port)
        await seen.wait("chatty", ReplicaStatus.READY)
        log = tmp_path / "state" / "replicas" / "chatty" / "engine.log"
        deadline = time.monotonic() + WAIT_S
        kept = (rotated(log, 2), rotated(log, 1), log)

        def last_line_kept() -> bool:
            return any(path.exists() and "line 1999" in path.read_text() for path in kept)

        # The engine may still be writing when the first rotation lands: wait for both.
        while not (rotated(log, 1).exists() and last_line_kept()):
            assert time.monotonic() < deadline, "never rotated, or the last line was lost"
            await asyncio.sleep(0.05)
        assert not rotated(log, 3).exists()

    run(tmp_path, test)


def test_a_new_supervisor_adopts_the_living_and_buries_the_dead(tmp_path: Path) -> None:
    async def test(make: Callable[..., Supervisor], seen: Recorder) -> None:
        first = make()
        await first.start()
        live_port, dead_port = free_port(), free_port()
        _launch(first, "live", stub_launch(live_port), live_port)
        _launch(first, "dead", stub_launch(dead_port, STUB_CHILD="1"), dead_port)
        live = await seen.wait("live", ReplicaStatus.READY)
        dead = await seen.wait("dead", ReplicaStatus.READY)
        orphan = _child_pid(tmp_path / "state" / "replicas" / "dead" / "engine.log")
        dead_process = first.replicas["dead"].process
        await first.close()  # as an agent that stops: its engines go on

        os.kill(dead.pid, signal.SIGKILL)  # the leader dies; its child lives on in the group
        assert dead_process is not None
        dead_process.wait(WAIT_S)
        assert pid_alive(orphan)

        second = make()
        await second.start()
        adopted = second.replicas["live"]
        assert adopted.status == ReplicaStatus.READY
        assert adopted.process is None, "not its child: adopted"
        assert adopted.record is not None
        assert adopted.record.pid == live.pid
        buried = second.replicas["dead"]
        assert buried.status == ReplicaStatus.CRASHED
        assert buried.detail == "the engine ended while its agent was not running"
        # Killed by signal: gone once the kernel has delivered it, which a loaded machine
        # may take a moment to do.
        deadline = time.monotonic() + WAIT_S
        while pid_alive(orphan) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert not pid_alive(orphan), "what the dead engine left in its group is killed"

        await second.stop("live")
        assert second.replicas["live"].status == ReplicaStatus.STOPPED
        live_process = first.replicas["live"].process
        assert live_process is not None
        live_process.wait(WAIT_S)  # the test process is its parent: reap it

    run(tmp_path, test)

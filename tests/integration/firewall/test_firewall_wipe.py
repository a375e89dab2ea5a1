"""`llmgw wipe` as a command: it lists what goes, asks for the machine's name, and then
stops the processes llmgw recorded (an agent holding its state's lock, an engine its
replica record names), removes llmgw's nft table (inside the test's own network
namespace; another table stays) and the directories. A wrong name removes nothing."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from llmgw.agent.firewall import plan
from llmgw.agent.nft import Nft
from llmgw.agent.state import ReplicaRecord, StateDir, read_proc_stat
from support.netns import Namespace, network_namespace

HOLD_LOCK = """
import fcntl, sys, time
handle = open(sys.argv[1], "a+")
fcntl.flock(handle, fcntl.LOCK_EX)
handle.seek(0); handle.truncate(); handle.write(str(__import__("os").getpid())); handle.flush()
print("locked", flush=True)
time.sleep(600)
"""


@dataclass
class Machine:
    ns: Namespace
    etc: Path
    lib: Path
    agent_state: Path
    agent: subprocess.Popen[str]
    engine: subprocess.Popen[bytes]
    stranger: subprocess.Popen[bytes]
    """A process llmgw did not start: it must outlive the wipe."""

    units: Path

    def wipe(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "llmgw", "wipe", "--nft", str(self.ns.nft_program)]
        command += ["--units-dir", str(self.units)]
        command += [
            "--dir",
            str(self.etc),
            "--dir",
            str(self.lib),
            "--agent-state-dir",
            str(self.agent_state),
        ]
        return subprocess.run(
            [*command, *args], input=stdin, capture_output=True, text=True, timeout=90, check=False
        )


def _record(state: Path, pid: int) -> None:
    stat = read_proc_stat(pid)
    assert stat is not None
    StateDir(state).save(
        ReplicaRecord(
            replica_id="chat-1",
            model="chat",
            profile="sim",
            engine="sim",
            pid=pid,
            pgid=stat.pgid,
            start_ticks=stat.start_ticks,
            port=20001,
            url="http://127.0.0.1:20001",
            health_url="http://127.0.0.1:20001/health",
            argv=("sleep", "600"),
            startup_timeout=timedelta(seconds=60),
            stop_grace=timedelta(seconds=5),
            started_at=datetime.now(UTC),
        )
    )


@pytest.fixture
def machine(tmp_path: Path) -> Iterator[Machine]:
    with network_namespace(tmp_path) as ns:
        etc, lib, units = tmp_path / "etc-llmgw", tmp_path / "lib-llmgw", tmp_path / "units"
        agent_state = lib / "agent"
        etc.mkdir()
        units.mkdir()
        for name in ("llmgw-firewall-sync.path", "llmgw-firewall-sync.service", "other.service"):
            (units / name).write_text("[Unit]\n")
        (etc / "llmgw.yaml").write_text("listen: :8080\n")
        StateDir(agent_state).create()
        Nft((str(ns.nft_program),)).apply(plan(enabled=True, port_range=(20000, 20999)))
        assert ns.nft("-f", "-", stdin="table inet host_rules {\n}\n").returncode == 0
        agent = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(agent_state / "agent.lock")],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert agent.stdout is not None
        assert agent.stdout.readline().strip() == "locked"
        engine = subprocess.Popen(["sleep", "600"], start_new_session=True)
        stranger = subprocess.Popen(["sleep", "600"])
        _record(agent_state, engine.pid)
        try:
            yield Machine(ns, etc, lib, agent_state, agent, engine, stranger, units)
        finally:
            for process in (agent, engine, stranger):
                if process.poll() is None:
                    process.kill()
                process.wait(10)
            if agent.stdout is not None:
                agent.stdout.close()


def _ended(process: subprocess.Popen[str] | subprocess.Popen[bytes]) -> bool:
    # wipe signalled it; this test is its parent and collects the exit.
    for _ in range(100):
        if process.poll() is not None:
            return True
        time.sleep(0.1)
    return False


def test_wipe_lists_asks_and_removes_everything_llmgw_left(machine: Machine) -> None:
    name = socket.gethostname()
    done = machine.wipe(stdin=name + "\n")
    assert done.returncode == 0, done.stderr
    listing = done.stdout
    assert f"This removes from {name}:" in listing
    assert f"process {machine.agent.pid}: llmgw agent" in listing
    assert f"process {machine.engine.pid}: engine sim of replica chat-1 (chat)" in listing
    assert "nft table inet llmgw" in listing
    for path in (machine.agent_state, machine.etc, machine.lib):
        assert f"  {path}\n" in listing
    assert f"  {machine.units / 'llmgw-firewall-sync.path'}\n" in listing
    assert _ended(machine.agent)
    assert machine.agent.returncode == -signal.SIGTERM
    assert _ended(machine.engine)
    assert machine.engine.returncode == -signal.SIGTERM
    assert machine.stranger.poll() is None
    assert machine.ns.tables() == ["inet host_rules"]
    assert not machine.etc.exists()
    assert not machine.lib.exists()
    assert sorted(p.name for p in machine.units.iterdir()) == ["other.service"]
    # Nothing is left: a second wipe says so.
    again = machine.wipe("--yes-i-mean", name)
    assert (again.returncode, again.stdout) == (0, f"llmgw wipe: nothing of llmgw's is on {name}\n")


def test_wipe_with_another_name_removes_nothing(machine: Machine) -> None:
    done = machine.wipe("--yes-i-mean", "some-other-host")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"llmgw wipe: 'some-other-host' is not this machine's name ({socket.gethostname()}):"
        " nothing was removed"
    )
    assert machine.agent.poll() is None
    assert machine.engine.poll() is None
    assert sorted(machine.ns.tables()) == ["inet host_rules", "inet llmgw"]
    assert (machine.etc / "llmgw.yaml").is_file()
    assert (machine.agent_state / "agent.lock").is_file()
    assert os.path.isdir(machine.lib)
    assert len(list(machine.units.iterdir())) == 3

"""The state directory: replica records that survive an agent restart, and the process
identity (PID and start time) that tells an engine from a later process with its PID."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from llmgw.agent.state import (
    ReplicaRecord,
    StateDir,
    check_replica_id,
    is_same_process,
    parse_proc_stat,
    read_proc_stat,
)
from llmgw.errors import ReplicaError

# A real line with a command name holding spaces and a parenthesis, as a process may
# name itself anything.
STAT = (
    "4242 (llama server) x) S 1 4242 4242 0 -1 4194560 1519 0 0 0 12 3 0 0 20 0 9 0 "
    "987654 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
)


def _record(replica_id: str = "r1", **changes: object) -> ReplicaRecord:
    fields: dict[str, object] = {
        "replica_id": replica_id,
        "model": "m",
        "profile": "p",
        "engine": "sim",
        "pid": 4242,
        "pgid": 4242,
        "start_ticks": 987654,
        "port": 20000,
        "ports": (20000,),
        "url": "http://127.0.0.1:20000",
        "health_url": "http://127.0.0.1:20000/health",
        "argv": ("python", "-m", "llmgw.cli.sim"),
        "startup_timeout": timedelta(minutes=1),
        "stop_grace": timedelta(seconds=5),
        "started_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    }
    fields.update(changes)
    return ReplicaRecord.model_validate(fields)


def test_stat_fields_are_counted_from_the_last_parenthesis() -> None:
    stat = parse_proc_stat(STAT)
    assert (stat.state, stat.pgid, stat.start_ticks) == ("S", 4242, 987654)


def test_a_short_stat_line_is_refused() -> None:
    with pytest.raises(ValueError, match="fields"):
        parse_proc_stat("1 (x) S 0 1")
    with pytest.raises(ValueError, match="parentheses"):
        parse_proc_stat("nothing here")


def test_this_process_is_itself_and_not_a_later_one() -> None:
    me = read_proc_stat(os.getpid())
    assert me is not None
    assert me.pgid == os.getpgid(0)
    assert is_same_process(os.getpid(), me.start_ticks)
    assert not is_same_process(os.getpid(), me.start_ticks + 1)


def test_a_gone_process_is_not_the_same(tmp_path: Path) -> None:
    fake_proc = tmp_path / "proc"
    (fake_proc / "4242").mkdir(parents=True)
    (fake_proc / "4242" / "stat").write_text(STAT)
    assert is_same_process(4242, 987654, fake_proc)
    assert not is_same_process(4343, 987654, fake_proc)
    (fake_proc / "4242" / "stat").write_text(STAT.replace(") S ", ") Z "))
    assert not is_same_process(4242, 987654, fake_proc), "a zombie has ended"


def test_records_survive_a_restart(tmp_path: Path) -> None:
    first = StateDir(tmp_path)
    first.create()
    first.save(_record("r1"))
    first.save(_record("r2", ready=True))
    again = StateDir(tmp_path).load_all()
    assert [r.replica_id for r in again] == ["r1", "r2"]
    assert again[1] == _record("r2", ready=True)
    assert not list(tmp_path.rglob("*.tmp")), "the write is atomic: no temporary left"


def test_a_broken_record_is_left_alone_and_the_rest_load(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.save(_record("good"))
    broken = state.record_path("broken")
    broken.parent.mkdir(parents=True)
    broken.write_text("{not json")
    assert [r.replica_id for r in state.load_all()] == ["good"]
    assert broken.exists()


def test_forgetting_keeps_the_log(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.save(_record("r1"))
    state.log_path("r1").write_text("engine output\n")
    state.forget("r1")
    assert state.load_all() == []
    assert state.log_path("r1").read_text() == "engine output\n"
    state.forget("r1")  # twice is fine


@pytest.mark.parametrize("bad", ["", "../etc", "a/b", ".hidden", "x" * 129, "spa ce"])
def test_an_id_that_cannot_name_a_directory_is_refused(bad: str) -> None:
    with pytest.raises(ReplicaError, match="refused: use up to 128 letters"):
        check_replica_id(bad)


def test_ordinary_ids_pass() -> None:
    assert check_replica_id("smol-cpu-0.a_1") == "smol-cpu-0.a_1"

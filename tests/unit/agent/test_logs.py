"""Engine logs: rotated by size while the engine keeps appending, and the tail sent
with a failed or crashed replica."""

from __future__ import annotations

import os
from pathlib import Path

from llmgw.agent.logs import LogPolicy, open_for_engine, read_tail, rotate_if_needed, rotated, tail_lines


def test_tail_is_the_last_lines_without_line_ends() -> None:
    assert tail_lines(b"a\nb\r\nc\n", 2) == ("b", "c")
    assert tail_lines(b"only", 5) == ("only",)
    assert tail_lines(b"x\n", 0) == ()


def test_tail_survives_bytes_that_are_not_text() -> None:
    assert tail_lines(b"ok\n\xff\xfe bad\n", 1) == ("\ufffd\ufffd bad",)


def test_a_small_log_is_not_rotated(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("short\n")
    assert not rotate_if_needed(log, LogPolicy(max_bytes=100, keep=2))
    assert not rotated(log, 1).exists()
    assert not rotate_if_needed(tmp_path / "missing.log", LogPolicy())


def test_rotation_shifts_and_keeps_only_so_many(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    policy = LogPolicy(max_bytes=10, keep=2)
    for n in range(4):
        log.write_text(f"generation {n}\n")
        assert rotate_if_needed(log, policy)
    assert log.read_text() == ""
    assert rotated(log, 1).read_text() == "generation 3\n"
    assert rotated(log, 2).read_text() == "generation 2\n"
    assert not rotated(log, 3).exists()


def test_the_engine_keeps_appending_after_a_rotation(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    fd = open_for_engine(log)  # as the engine holds it: O_APPEND
    try:
        os.write(fd, b"before rotation, long enough\n")
        assert rotate_if_needed(log, LogPolicy(max_bytes=10, keep=1))
        os.write(fd, b"after\n")
    finally:
        os.close(fd)
    # With O_APPEND the next write lands at the new end, not at the old offset (which
    # would leave a hole of zero bytes the size of the old log).
    assert log.read_bytes() == b"after\n"
    assert rotated(log, 1).read_text() == "before rotation, long enough\n"


def test_the_tail_reaches_into_the_rotated_log(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    rotated(log, 1).write_text("".join(f"old {n}\n" for n in range(10)))
    log.write_text("new 0\nnew 1\n")
    assert read_tail(log, 4) == ("old 8", "old 9", "new 0", "new 1")
    assert read_tail(log, 2) == ("new 0", "new 1")


def test_the_tail_of_a_huge_log_reads_only_its_end(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_bytes(b"x" * 200_000 + b"\n" + b"".join(b"line %d\n" % n for n in range(50)))
    tail = read_tail(log, 3)
    assert tail == ("line 47", "line 48", "line 49")


def test_no_log_is_no_tail(tmp_path: Path) -> None:
    assert read_tail(tmp_path / "engine.log", 40) == ()

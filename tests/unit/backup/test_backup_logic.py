"""The pure parts of backups: archive names and which are pruned, the manifest's checks,
and when the daily backup is next due; and the scheduled loop reporting a failure as
the backup.failed event."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from llmgw.backup.manifest import Manifest, check_members, parse_manifest
from llmgw.backup.names import archive_name, archive_time, newest_time, to_prune
from llmgw.backup.schedule import FAILED_EVENT, next_run, run_daily
from llmgw.errors import BackupError


def _at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_names_carry_the_start_time_and_sort_newest_first() -> None:
    first = archive_name(_at("2026-12-01T03:00:00"), encrypted=True)
    second = archive_name(_at("2026-12-02T03:00:00"), encrypted=False)
    assert first == "llmgw-backup-20261201T030000Z.tar.gz.age"
    assert archive_time(first) == _at("2026-12-01T03:00:00")
    names = [first, second, "notes.txt", second + ".partial", "llmgw-backup-2026.tar.gz"]
    assert newest_time(names) == _at("2026-12-02T03:00:00")
    assert to_prune(names, 1) == [first]
    assert to_prune(names, 2) == []
    assert newest_time(["notes.txt"]) is None


MEMBERS = {"store/llmgw.db": "ab", "ca/ca_file": "cd"}
MANIFEST = Manifest(created=1.0, store_kind="sqlite", schema_revision="0012", members=MEMBERS)


def test_a_manifest_reads_back_and_checks_its_members() -> None:
    again = parse_manifest(MANIFEST.to_json())
    assert again == MANIFEST
    check_members(again, {"store/llmgw.db": "ab", "ca/ca_file": "cd"})
    with pytest.raises(ValueError, match="ca/ca_file does not match"):
        check_members(again, {"store/llmgw.db": "ab", "ca/ca_file": "00"})
    with pytest.raises(ValueError, match="ca/ca_file is listed in its manifest but missing"):
        check_members(again, {"store/llmgw.db": "ab"})
    with pytest.raises(ValueError, match="extra is in it but not in its manifest"):
        check_members(again, {"store/llmgw.db": "ab", "ca/ca_file": "cd", "extra": "ef"})


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"{", "not JSON"),
        (b'{"version": 9}', "format 9"),
        (b'{"version": 1, "store_kind": "mysql", "members": {}}', "names no store"),
        (b'{"version": 1, "store_kind": "sqlite", "members": {}}', "lists no store/llmgw.db"),
    ],
)
def test_a_bad_manifest_is_refused_saying_why(data: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_manifest(data)


def test_the_next_run_is_the_next_time_of_day_in_utc() -> None:
    assert next_run(_at("2026-12-03T02:59:00"), 3, 0) == _at("2026-12-03T03:00:00")
    assert next_run(_at("2026-12-03T03:00:00"), 3, 0) == _at("2026-12-04T03:00:00")
    assert next_run(_at("2026-12-31T23:30:00"), 0, 15) == _at("2027-01-01T00:15:00")


class _Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, Mapping[str, Any]]] = []

    def emit(self, event_type: str, key: str, data: Mapping[str, Any]) -> None:
        self.seen.append((event_type, key, data))


def test_a_failed_scheduled_backup_sends_backup_failed_and_the_loop_goes_on() -> None:
    events = _Events()
    # Read for the due time, for the wait (twice: before and after it), and for the start.
    times = iter(
        [
            _at("2026-12-03T02:59:59.99"),
            _at("2026-12-03T02:59:59.99"),
            _at("2026-12-03T03:00:00"),
            _at("2026-12-03T03:00:00"),
        ]
    )
    calls: list[float] = []

    async def failing(started: float) -> None:
        calls.append(started)
        raise BackupError("backup_dir /x: cannot be made (Permission denied): set another")

    def clock() -> float:
        # After the first day's calls, the clock stays where it is: the loop waits a day.
        return next(times, _at("2026-12-03T03:00:01"))

    async def run() -> None:
        task = asyncio.create_task(run_daily(3, 0, failing, events, clock))
        for _ in range(200):
            if events.seen:
                break
            await asyncio.sleep(0.01)
        assert not task.done()  # it goes on to wait for the next day
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert calls == [_at("2026-12-03T03:00:00")]
    assert [(t, k) for t, k, _ in events.seen] == [(FAILED_EVENT, "2026-12-03")]
    assert "Permission denied" in events.seen[0][2]["error"]


def test_a_timer_that_wakes_early_does_not_start_the_backup_early() -> None:
    """The loop's timer is monotonic and may wake before the wall clock is at the due
    time (seen by 0.75 ms): the loop sleeps out the rest, and runs once that day."""
    now = [_at("2026-12-03T02:59:30")]
    calls: list[float] = []
    naps: list[float] = []

    async def backup(started: float) -> None:
        calls.append(started)
        raise asyncio.CancelledError  # one day is enough: ends the loop

    async def early_sleep(seconds: float) -> None:
        naps.append(seconds)
        now[0] += seconds - 0.00075 if len(naps) == 1 else seconds

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run_daily(3, 0, backup, _Events(), lambda: now[0], early_sleep))
    assert calls == [_at("2026-12-03T03:00:00")]
    assert len(naps) == 2
    assert naps[1] == pytest.approx(0.00075, abs=1e-6)

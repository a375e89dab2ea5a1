"""The spill file: chunks written at stop come back as they were (records, sums,
spend; charged to nobody), the file 0600 in a 0700 directory, removed once read; a
line that cannot be read is counted and skipped."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from llmgw.auth import spill
from llmgw.auth.budgets import day_of, spread_spend
from llmgw.auth.usage import UsageChunk
from llmgw.store.rows import UsageRow
from llmgw.store.usage import five_minute_sums, group_rows

NOW = 1_800_000_000.0


def chunk(first: int, count: int) -> UsageChunk:
    rows = [
        UsageRow(
            "k", None, "p", "t", "o", "m", 200, i % 2 == 0, NOW + i, f"r{i}", "rep", 3, 4, 7, 0.5,
            0.1 if i % 2 == 0 else None, 0.2, {"run": "x"} if i == first else None,
        )
        for i in range(first, first + count)
    ]  # fmt: skip
    spend = spread_spend({(("project:p", "team:t"), day_of(NOW)): 7 * count})
    return UsageChunk(group_rows(rows), five_minute_sums(rows), spend, spend)


def test_chunks_come_back_from_the_spill_file_as_they_were(tmp_path: Path) -> None:
    path = tmp_path / "state" / spill.FILE_NAME
    chunks = [chunk(0, 3), chunk(3, 2)]
    assert spill.dump(path, chunks) == 5
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    with path.open("ab") as handle:
        handle.write(b"{not a chunk\n")
    back, bad = spill.load(path)
    assert bad == 1
    assert not path.exists()
    for was, now in zip(chunks, back, strict=True):
        assert (now.records, now.sums, now.spend, now.size) == (was.records, was.sums, was.spend, was.size)
        assert now.charged == {}  # a new process's ledger never counted it
    assert spill.load(path) == ([], 0)


def test_the_spill_file_lives_in_the_state_directory() -> None:
    assert spill.spill_path("/var/lib/llmgw", Path("/etc/llmgw")) == Path("/var/lib/llmgw/usage-spill.jsonl")
    assert spill.spill_path(None, Path("/etc/llmgw")) == Path("/etc/llmgw/state/usage-spill.jsonl")
    assert spill.spill_path(None, None) is None

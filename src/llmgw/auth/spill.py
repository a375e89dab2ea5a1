"""The usage records a stopping gateway could not write: kept in a file and replayed at
the next start, rather than lost with the process.

When the store refuses writes (gone, full, its file broken) records wait in the usage
writer's buffer; a gateway stopped then used to lose them all. At stop, whatever the
writer could not write in its few seconds goes to `usage-spill.jsonl` under llmgw's
state directory (systemd's `STATE_DIRECTORY`, else `state/` beside the configuration),
one buffered chunk (records, five-minute sums, spend) a line, the file 0600 in a 0700
directory; at the next start its chunks go back into the buffer, to be written like
any others, and the file is removed. A line that cannot be read is counted and skipped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from llmgw.auth.usage import UsageChunk
from llmgw.core.private_dirs import private_dir

log = logging.getLogger(__name__)

FILE_NAME = "usage-spill.jsonl"
FILE_MODE = 0o600


def spill_path(state_directory: str | None, config_dir: Path | None) -> Path | None:
    """Where the spill file lives: the service's state directory, else `state/` beside
    the configuration; None when there is neither (records are then lost at stop)."""
    if state_directory:
        return Path(state_directory) / FILE_NAME
    if config_dir is not None:
        return config_dir / "state" / FILE_NAME
    return None


def _pairs(mapping: Mapping[Any, Any]) -> list[list[Any]]:
    return [[list(key), value] for key, value in mapping.items()]


def encode(chunk: UsageChunk) -> bytes:
    """One chunk as one line of JSON (tuple keys as lists of pairs)."""
    return orjson.dumps(
        {
            "records": [[list(key), [list(v) for v in values]] for key, values in chunk.records.items()],
            "sums": _pairs(chunk.sums),
            "spend": _pairs(chunk.spend),
        }
    )


def decode(line: bytes) -> UsageChunk:
    """A chunk from a line `encode` wrote; ValueError (or KeyError, TypeError) when the
    line is not one. Its spend counts as not charged: a new process's ledger never saw it."""
    data = orjson.loads(line)
    records = {tuple(key): [tuple(v) for v in values] for key, values in data["records"]}
    sums = {tuple(key): list(values) for key, values in data["sums"]}
    spend = {tuple(key): int(cost) for key, cost in data["spend"]}
    return UsageChunk(records, sums, spend, {})


def dump(path: Path, chunks: Iterable[UsageChunk]) -> int:
    """Appends the chunks to the spill file (made 0600, in a directory made 0700);
    returns how many records. OSError when it cannot be written."""
    private_dir(path.parent)
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
    with os.fdopen(fd, "wb") as handle:
        for chunk in chunks:
            handle.write(encode(chunk) + b"\n")
            written += chunk.size
        handle.flush()
        os.fsync(handle.fileno())
    return written


def load(path: Path) -> tuple[list[UsageChunk], int]:
    """The chunks in the spill file and how many of its lines could not be read; the
    file is removed once read. Nothing when there is no file."""
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return [], 0
    chunks: list[UsageChunk] = []
    bad = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            chunks.append(decode(line))
        except (ValueError, KeyError, TypeError):
            bad += 1
    path.unlink()
    return chunks, bad

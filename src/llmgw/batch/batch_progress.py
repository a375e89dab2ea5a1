"""A batch's progress on disk, so a gateway that dies mid-batch resumes it without
losing a line or writing one twice.

Three files in the batch's work directory: the output and error lines written so far,
and `progress`, one record per finished line (`index ok output_end error_end`). A
line's result is written and synced first, its record after, and only a line with a
record counts as done. On reopening, the output and error files are cut back to the
ends the last whole record names, so a result written without its record (the process
died between the two) is dropped and its line runs again.

Every method blocks (the disk); the runner calls them in a thread.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from llmgw.core.private_dirs import private_dir

OUTPUT = "output.jsonl"
ERRORS = "errors.jsonl"
PROGRESS = "progress"


class Progress:
    """The finished lines of one batch, and the files their results go to."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.done: set[int] = set()
        self.completed = 0
        self.failed = 0
        private_dir(folder)
        output_end, error_end, kept = self._read()
        self._output = _cut(folder / OUTPUT, output_end)
        self._errors = _cut(folder / ERRORS, error_end)
        self._progress = _cut(folder / PROGRESS, kept)

    @property
    def output_path(self) -> Path:
        return self.folder / OUTPUT

    @property
    def error_path(self) -> Path:
        return self.folder / ERRORS

    def _read(self) -> tuple[int, int, int]:
        """The ends of output and errors the last whole record names, and how many bytes
        of the progress file hold whole records."""
        path = self.folder / PROGRESS
        if not path.exists():
            return 0, 0, 0
        data = path.read_bytes()
        kept = data.rfind(b"\n") + 1
        output_end = error_end = 0
        for record in data[:kept].splitlines():
            index, ok, output_end_s, error_end_s = record.split()
            self.done.add(int(index))
            if ok == b"1":
                self.completed += 1
            else:
                self.failed += 1
            output_end, error_end = int(output_end_s), int(error_end_s)
        return output_end, error_end, kept

    def record(self, index: int, ok: bool, line: bytes) -> None:
        """Writes one line's result to the output (`ok`) or error file, then its record;
        the line counts as done once both are on disk."""
        self.record_many([(index, ok, line)])

    def record_many(self, results: list[tuple[int, bool, bytes]]) -> None:
        """Several lines' results at once: all results written and synced, then all
        their records, each naming the ends of the files after its own result."""
        records = []
        wrote_output = wrote_errors = False
        for index, ok, line in results:
            target = self._output if ok else self._errors
            target.write(line + b"\n")
            wrote_output, wrote_errors = wrote_output or ok, wrote_errors or not ok
            records.append(f"{index} {int(ok)} {self._output.tell()} {self._errors.tell()}\n")
        if wrote_output:
            _sync(self._output)
        if wrote_errors:
            _sync(self._errors)
        self._progress.write("".join(records).encode())
        _sync(self._progress)
        for index, ok, _ in results:
            self.done.add(index)
            if ok:
                self.completed += 1
            else:
                self.failed += 1

    def close(self) -> None:
        for handle in (self._output, self._errors, self._progress):
            handle.close()


def _cut(path: Path, end: int) -> BinaryIO:
    """`path` opened for appending after its first `end` bytes (what follows dropped);
    a file already moved away (a batch finalizing) is found empty and stays so."""
    handle = path.open("a+b")
    handle.seek(0, os.SEEK_END)
    if handle.tell() > end:
        handle.truncate(end)
        handle.seek(end)
    return handle


def _sync(handle: BinaryIO) -> None:
    handle.flush()
    os.fsync(handle.fileno())

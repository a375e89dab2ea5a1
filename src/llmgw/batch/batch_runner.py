"""Running one batch: its input read line by line, each good line sent through the
gateway's own request path `concurrency` at a time in the lowest admission band, each
result recorded (llmgw.batch.batch_progress) before it counts, and the output and error
files made into files of the owner's when it ends.

Lines refused for want of capacity or by a rate limit (429, 503) wait and try again:
a batch has its 24 hours, and what it must not do is turn a busy moment into failed
lines. Any other answer is the line's result, a spent budget (429 insufficient_quota)
included.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from llmgw.batch import batch_objects as objects
from llmgw.batch.batch_capture import Captured, LineHeaders, LineScope
from llmgw.batch.batch_lines import BadLine, Line, check_line
from llmgw.batch.batch_progress import Progress
from llmgw.batch.batch_writer import ResultWriter
from llmgw.batch.files_disk import FileDisk
from llmgw.store.batch_files import BatchFilesRepo, FileRow

if TYPE_CHECKING:
    from llmgw.auth.principal import Principal
    from llmgw.http.rsgi import HTTPProtocol, Scope

log = logging.getLogger(__name__)

ServeAs = Callable[["Scope", "HTTPProtocol", "Principal | None", "str | None"], Awaitable[None]]
"""The gateway's in-process request path (`GatewayApp.serve_as`)."""

_RETRY_STATUSES = frozenset({429, 503})
_MAX_RETRIES = 50
_MAX_RETRY_WAIT_S = 30.0
# How often the counts a client polls are written to the store while lines run.
_SAVE_EVERY_S = 1.0
_READ_LINES = 256
_TAGS_HEADER = "x-llmgw-tags"


@dataclass(frozen=True)
class RunRules:
    concurrency: int
    band: str | None
    retain_s: float
    runner: str
    """This gateway's name in a batch's lease."""
    lease_s: float
    shared: bool
    """Other gateways share the store: a lease another holds is respected."""


def read_lines(path: Path) -> Generator[list[bytes]]:
    """The file's lines, a few hundred at a time (each batch one hop to a thread)."""
    with path.open("rb") as handle:
        chunk: list[bytes] = []
        for raw in handle:
            chunk.append(raw)
            if len(chunk) >= _READ_LINES:
                yield chunk
                chunk = []
        if chunk:
            yield chunk


class BatchRun:
    """One batch running on this gateway until it ends or is cancelled."""

    def __init__(
        self,
        batch_id: str,
        repo: BatchFilesRepo,
        disk: FileDisk,
        serve_as: ServeAs,
        principal_of: Callable[[str], Principal | None],
        rules: RunRules,
        clock: Callable[[], float],
    ) -> None:
        self.batch_id = batch_id
        self._repo = repo
        self._disk = disk
        self._serve_as = serve_as
        self._principal_of = principal_of
        self._rules = rules
        self._clock = clock
        self.cancelling = asyncio.Event()
        self._lost = asyncio.Event()
        self._halt = asyncio.Event()
        self._writer: ResultWriter | None = None
        self._failure: BaseException | None = None

    def cancel(self) -> None:
        self.cancelling.set()
        self._halt.set()

    async def run(self) -> None:
        rules = self._rules
        if not await self._repo.claim(
            self.batch_id, rules.runner, self._clock(), rules.lease_s, force=not rules.shared
        ):
            return  # another gateway runs it
        try:
            await self._run()
        finally:
            if not self._lost.is_set():
                await self._repo.release(self.batch_id, rules.runner)

    async def _run(self) -> None:
        row = await self._repo.batch(None, self.batch_id)
        if row is None:
            return
        batch: dict[str, Any] = orjson.loads(row.body)
        progress = await asyncio.to_thread(Progress, self._disk.work(self.batch_id))
        try:
            if batch["status"] == objects.VALIDATING:
                batch = await self._save(objects.moved(batch, objects.IN_PROGRESS, self._clock()), progress)
            if batch["status"] == objects.IN_PROGRESS:
                try:
                    ended = await self._lines(batch, row.key_hash, progress)
                except FileNotFoundError:
                    ended = objects.FAILED
                    batch["errors"] = {
                        "object": "list",
                        "data": [
                            {
                                "code": "input_file_missing",
                                "message": f"the input file {batch['input_file_id']} was deleted",
                                "param": "input_file_id",
                                "line": None,
                            }
                        ],
                    }
                if ended == _LOST:
                    return  # another gateway took the batch over and runs the rest
                batch = await self._save(objects.moved(batch, objects.FINALIZING, self._clock()), progress)
            elif batch["status"] == objects.CANCELLING:
                ended = objects.CANCELLED
            else:
                ended = objects.COMPLETED  # finalizing when the gateway stopped
            await self._finish(batch, progress, ended)
        finally:
            await asyncio.to_thread(progress.close)

    async def _lines(self, batch: dict[str, Any], key_hash: str, progress: Progress) -> str:
        """Runs the lines not yet done; returns how the batch ends."""
        endpoint = str(batch["endpoint"])
        source = self._disk.path(str(batch["input_file_id"]))
        slots = asyncio.Semaphore(self._rules.concurrency)
        running: set[asyncio.Task[None]] = set()
        seen: set[str] = set()
        writer = self._writer = ResultWriter(progress)
        saver = asyncio.create_task(self._keep_saving(batch, progress))
        index = -1
        ended = objects.COMPLETED
        chunks = read_lines(source)
        try:
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                for raw in chunk:
                    index += 1
                    verdict = check_line(raw, endpoint, seen)
                    if verdict is None or index in progress.done:
                        continue
                    if isinstance(verdict, BadLine):
                        await self._bad(index, verdict, progress)
                        continue
                    await slots.acquire()
                    if self._halt.is_set():
                        slots.release()
                        raise _Stop(self._halted())
                    if self._clock() >= float(batch["expires_at"]):
                        slots.release()
                        raise _Stop(objects.EXPIRED)
                    task = asyncio.create_task(self._one(index, verdict, key_hash, progress, slots, endpoint))
                    running.add(task)
                    task.add_done_callback(running.discard)
                    task.add_done_callback(self._line_ended)
            while running:
                stop = asyncio.create_task(self._halt.wait())
                await asyncio.wait({*running, stop}, return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                if self._halt.is_set():
                    raise _Stop(self._halted())
        except _Stop as stop_reason:
            ended = stop_reason.status
        finally:
            for task in (*running, saver):
                task.cancel()
            await asyncio.gather(*running, saver, return_exceptions=True)
            # Results of lines that finished are written even when the rest stop.
            await writer.close()
            self._writer = None
            await asyncio.to_thread(chunks.close)
        return ended

    def _line_ended(self, task: asyncio.Task[None]) -> None:
        """A line that failed to run or to be recorded (not an answer: a fault of the
        gateway's, like a full disk) stops the batch here; it resumes at the next start."""
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()
            self._halt.set()

    async def _one(
        self,
        index: int,
        line: Line,
        key_hash: str,
        progress: Progress,
        slots: asyncio.Semaphore,
        endpoint: str,
    ) -> None:
        try:
            request_id = objects.new_id("batch_req_")
            principal = self._principal_of(key_hash)
            if principal is None:
                body: object = {
                    "error": {
                        "message": "the API key that created this batch can no longer be used",
                        "type": "authentication_error",
                        "param": None,
                        "code": "invalid_api_key",
                    }
                }
                status = 401
            else:
                status, body = await self._send(endpoint, line, request_id, principal)
            ok = 200 <= status < 300
            error = None if ok else _error_of(body, status)
            record = objects.output_line(request_id, line.custom_id, status, body, error)
            await self._record(index, ok, orjson.dumps(record), progress)
        finally:
            slots.release()

    async def _send(
        self, endpoint: str, line: Line, request_id: str, principal: Principal
    ) -> tuple[int, object]:
        scope = LineScope(
            endpoint,
            LineHeaders(
                {
                    "content-type": "application/json",
                    "x-request-id": request_id,
                    _TAGS_HEADER: f"batch={self.batch_id}",
                }
            ),
        )
        payload = orjson.dumps(line.body)
        for _ in range(_MAX_RETRIES):
            captured = Captured(payload)
            await self._serve_as(scope, captured, principal, self._rules.band)
            status = captured.status or 500
            if not _retryable(status, captured.answer):
                break
            await asyncio.sleep(_retry_wait(captured.header("retry-after")))
        answer = captured.answer
        try:
            return status, orjson.loads(answer)
        except orjson.JSONDecodeError:
            return status, answer.decode("utf-8", "replace")

    async def _bad(self, index: int, bad: BadLine, progress: Progress) -> None:
        error = {"code": bad.code, "message": bad.message, "line": index + 1}
        record = objects.output_line(objects.new_id("batch_req_"), bad.custom_id or "", 0, None, error)
        await self._record(index, False, orjson.dumps(record), progress)

    async def _record(self, index: int, ok: bool, line: bytes, progress: Progress) -> None:
        writer = self._writer
        assert writer is not None  # lines run only inside `_lines`
        await writer.put(index, ok, line)

    def _halted(self) -> str:
        if self._failure is not None:
            raise self._failure
        return _LOST if self._lost.is_set() else objects.CANCELLED

    async def _keep_saving(self, batch: dict[str, Any], progress: Progress) -> None:
        """Renews the lease and writes the counts, every `_SAVE_EVERY_S`; a lease another
        gateway took over stops the lines here (that one runs them from the progress)."""
        rules = self._rules
        while True:
            await asyncio.sleep(_SAVE_EVERY_S)
            if not await self._repo.renew(self.batch_id, rules.runner, self._clock() + rules.lease_s):
                log.warning("batch %s was taken over by another gateway; it stops here", self.batch_id)
                self._lost.set()
                self._halt.set()
                return
            await self._save(batch, progress)

    async def _save(self, batch: dict[str, Any], progress: Progress) -> dict[str, Any]:
        """Writes the batch with its current counts; a cancel asked meanwhile (through
        another gateway's store row) is noticed here."""
        counts = dict(batch["request_counts"])
        counts["completed"], counts["failed"] = progress.completed, progress.failed
        batch["request_counts"] = counts
        stored = await self._repo.batch(None, self.batch_id)
        if (
            stored is not None
            and stored.status == objects.CANCELLING
            and batch["status"] == objects.IN_PROGRESS
        ):
            self.cancel()
            batch = objects.moved(batch, objects.CANCELLING, self._clock())
            batch["request_counts"] = counts
        await self._repo.save_batch(
            self.batch_id, str(batch["status"]), orjson.dumps(batch).decode(), self._clock()
        )
        return batch

    async def _finish(self, batch: dict[str, Any], progress: Progress, ended: str) -> None:
        """Makes the output and error files the owner's, then the batch final."""
        now = self._clock()
        output_id, error_id = objects.reserved_file_ids(batch)
        row = await self._repo.batch(None, self.batch_id)
        owner = row.owner if row is not None else ""
        for file_id, path, field, name in (
            (output_id, progress.output_path, "output_file_id", "batch_output.jsonl"),
            (error_id, progress.error_path, "error_file_id", "batch_errors.jsonl"),
        ):
            placed = await self._place(owner, file_id, path, name, now)
            batch[field] = file_id if placed else None
        counts = dict(batch["request_counts"])
        counts["completed"], counts["failed"] = progress.completed, progress.failed
        batch["request_counts"] = counts
        final = objects.moved(batch, ended, now)
        await self._repo.save_batch(self.batch_id, ended, orjson.dumps(final).decode(), now)
        await asyncio.to_thread(self._disk.remove_work, self.batch_id)
        log.info(
            "batch %s %s: %d completed, %d failed", self.batch_id, ended, progress.completed, progress.failed
        )

    async def _place(self, owner: str, file_id: str, path: Path, name: str, now: float) -> bool:
        """Moves a non-empty result file into the files area and records it (again
        safely after a restart in the middle); whether the batch has that file."""
        if await self._repo.file(owner, file_id) is not None:
            return True
        size = await asyncio.to_thread(_size, path)
        if size == 0:
            target = self._disk.path(file_id)
            if not await asyncio.to_thread(target.exists):
                return False
            size = await asyncio.to_thread(_size, target)
        else:
            await asyncio.to_thread(self._disk.place, path, file_id)
        expires = now + self._rules.retain_s
        await self._repo.add_file(FileRow(file_id, owner, "batch_output", name, size, now, expires))
        return True


_LOST = "lost"
"""How the lines end when another gateway took the batch over: not a batch status."""


class _Stop(Exception):
    """The lines stop before the end: the batch was cancelled or ran out of time."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _retry_wait(header: str | None) -> float:
    try:
        wait = float(header) if header else 1.0
    except ValueError:
        wait = 1.0
    return min(max(wait, 0.1), _MAX_RETRY_WAIT_S) if math.isfinite(wait) else 1.0


def _retryable(status: int, answer: bytes) -> bool:
    """A refusal that passes with time: no capacity, or a rate limit, but not a spent
    budget (429 of type insufficient_quota), which does not come back within a wait."""
    if status not in _RETRY_STATUSES:
        return False
    try:
        body = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return True
    error = body.get("error") if isinstance(body, dict) else None
    return not (isinstance(error, dict) and error.get("type") == "insufficient_quota")


def _error_of(body: object, status: int) -> dict[str, Any]:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        return {"code": error.get("code") or str(status), "message": error.get("message") or ""}
    return {"code": str(status), "message": "the request failed"}


__all__ = ["BatchRun", "RunRules", "ServeAs", "read_lines"]

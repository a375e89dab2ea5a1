"""The Batch API on the client port (`/v1/batches`): create over an uploaded file,
retrieve, list, cancel, each within the caller's project or person.

A batch is checked whole before it is stored: its file is the caller's and meant for
batches, it has at least one request object and no more lines than
`router.batch.max_lines`; a refusal stores nothing. Lines that are individually wrong
go to the batch's error file when it runs (llmgw.batch.batch_runner)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from llmgw.auth.gate import AuthGate
from llmgw.batch import batch_objects as objects
from llmgw.batch.batch_lines import ENDPOINTS
from llmgw.batch.batch_runner import read_lines
from llmgw.batch.files_http import answer, caller, guarded, json_body, limit_of, query
from llmgw.errors import BadRequest, Conflict, MethodNotAllowed, NotFound
from llmgw.http.rsgi import HTTPProtocol, Scope
from llmgw.store.batch_files import BatchFilesRepo, BatchRow

PREFIX = "/v1/batches"
_LIST_DEFAULT = 20
_LIST_MOST = 100


@dataclass(frozen=True)
class Shape:
    """What a pass over an input file found: its requests, and lines that are JSON objects."""

    lines: int
    objects: int


def shape_of(path: Path, most: int) -> Shape:
    """Counts the file's non-blank lines (stopping past `most`) and its JSON objects
    (blocks: run in a thread)."""
    lines = found = 0
    for chunk in read_lines(path):
        for raw in chunk:
            if not raw.strip():
                continue
            lines += 1
            if lines > most:
                return Shape(lines, found)
            try:
                if isinstance(orjson.loads(raw), dict):
                    found += 1
            except orjson.JSONDecodeError:
                pass
    return Shape(lines, found)


class BatchesApp:
    """The /v1/batches routes; `launch` starts a stored batch on this gateway and
    `cancel` stops one running here (llmgw.batch.batch_service)."""

    def __init__(
        self,
        repo: BatchFilesRepo,
        input_path: Callable[[str], Path],
        gate: AuthGate,
        max_lines: int,
        launch: Callable[[str], None],
        cancel: Callable[[str], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._repo = repo
        self._input_path = input_path
        self._gate = gate
        self._max_lines = max_lines
        self._launch = launch
        self._cancel = cancel
        self._clock = clock

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        await guarded(proto, self._route(scope, proto))

    async def _route(self, scope: Scope, proto: HTTPProtocol) -> None:
        rest = scope.path[len(PREFIX) :].strip("/")
        parts = rest.split("/") if rest else []
        method = scope.method
        who = await caller(self._gate, scope, self._clock)
        if not parts:
            if method == "POST":
                await self._create(proto, who.owner, who.key_hash)
            elif method == "GET":
                await self._list(scope, proto, who.owner)
            else:
                raise MethodNotAllowed(f"{PREFIX} takes GET or POST", allow="GET, POST")
            return
        row = await self._repo.batch(who.owner, parts[0]) if len(parts) <= 2 else None
        if row is None or (len(parts) == 2 and parts[1] != "cancel"):
            raise NotFound(f"no batch {parts[0]!r}", param="batch_id", code="batch_not_found")
        if len(parts) == 2:
            if method != "POST":
                raise MethodNotAllowed(f"{scope.path} takes POST", allow="POST")
            await self._cancel_batch(proto, row)
        elif method == "GET":
            answer(proto, objects.public(orjson.loads(row.body)))
        else:
            raise MethodNotAllowed(f"{scope.path} takes GET", allow="GET")

    async def _create(self, proto: HTTPProtocol, owner: str, key_hash: str) -> None:
        body = await json_body(proto)
        endpoint = body.get("endpoint")
        if endpoint not in ENDPOINTS:
            raise BadRequest(
                f"endpoint {endpoint!r} is not one a batch runs: use one of {', '.join(ENDPOINTS)}",
                param="endpoint",
            )
        if body.get("completion_window") != "24h":
            raise BadRequest("completion_window must be 24h", param="completion_window")
        metadata = body.get("metadata")
        if metadata is not None and not (
            isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())
        ):
            raise BadRequest("metadata is an object of strings", param="metadata")
        file_id = body.get("input_file_id")
        found = await self._repo.file(owner, file_id) if isinstance(file_id, str) else None
        if found is None:
            raise NotFound(f"no file {file_id!r}", param="input_file_id", code="file_not_found")
        if found.purpose != "batch":
            raise BadRequest(
                f"file {found.id} was uploaded with purpose {found.purpose}: upload it with purpose batch",
                param="input_file_id",
            )
        shape = await asyncio.to_thread(shape_of, self._input_path(found.id), self._max_lines)
        if shape.lines > self._max_lines:
            raise BadRequest(
                f"file {found.id} holds more than {self._max_lines} requests, the most one batch may "
                "(router.batch.max_lines): split it",
                param="input_file_id",
                code="too_many_lines",
            )
        if shape.objects == 0:
            raise BadRequest(
                f"file {found.id} is not JSONL: each line must be a request object with custom_id, method, "
                "url and body",
                param="input_file_id",
                code="invalid_file",
            )
        now = self._clock()
        batch_id = objects.new_id("batch_")
        batch = objects.new_batch(
            batch_id,
            endpoint=str(endpoint),
            input_file_id=found.id,
            total=shape.lines,
            metadata=metadata,
            now=now,
        )
        await self._repo.add_batch(
            BatchRow(batch_id, owner, key_hash, objects.VALIDATING, orjson.dumps(batch).decode(), now, now)
        )
        self._launch(batch_id)
        answer(proto, objects.public(batch))

    async def _list(self, scope: Scope, proto: HTTPProtocol, owner: str) -> None:
        values = query(scope)
        limit = limit_of(values, _LIST_DEFAULT, _LIST_MOST)
        rows = await self._repo.batches(owner, limit=limit + 1, after=values.get("after"))
        items = [objects.public(orjson.loads(r.body)) for r in rows[:limit]]
        answer(proto, objects.page(items, len(rows) > limit))

    async def _cancel_batch(self, proto: HTTPProtocol, row: BatchRow) -> None:
        batch: dict[str, Any] = orjson.loads(row.body)
        status = batch["status"]
        if status in (objects.COMPLETED, objects.FAILED, objects.EXPIRED, objects.CANCELLED):
            raise Conflict(f"batch {row.id} is {status}: only a batch still running can be cancelled")
        if status != objects.CANCELLING:
            batch = objects.moved(batch, objects.CANCELLING, self._clock())
            await self._repo.save_batch(
                row.id, objects.CANCELLING, orjson.dumps(batch).decode(), self._clock()
            )
        self._cancel(row.id)
        answer(proto, objects.public(batch))

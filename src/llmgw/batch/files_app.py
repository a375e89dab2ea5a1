"""The Files API on the client port (`/v1/files`): upload, list, retrieve, content,
delete, each within the caller's project or person; another owner's file does not
exist for the caller (404)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator

from llmgw.auth.gate import AuthGate
from llmgw.batch import files_upload
from llmgw.batch.batch_objects import file_object, new_id, page
from llmgw.batch.files_disk import FileDisk
from llmgw.batch.files_http import Caller, answer, caller, guarded, limit_of, query
from llmgw.errors import BadRequest, MethodNotAllowed, NotFound
from llmgw.http.rsgi import HTTPProtocol, Scope
from llmgw.store.batch_files import BatchFilesRepo, FileRow

PREFIX = "/v1/files"
UPLOAD_PURPOSES: tuple[str, ...] = ("batch", "user_data")
_LIST_MOST = 10_000


class FilesApp:
    """The /v1/files routes."""

    def __init__(
        self,
        repo: BatchFilesRepo,
        disk: FileDisk,
        gate: AuthGate,
        max_file_bytes: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._repo = repo
        self._disk = disk
        self._gate = gate
        self._max_file_bytes = max_file_bytes
        self._clock = clock

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        await guarded(proto, self._route(scope, proto))

    async def _route(self, scope: Scope, proto: HTTPProtocol) -> None:
        rest = scope.path[len(PREFIX) :].strip("/")
        parts = rest.split("/") if rest else []
        method = scope.method
        if not parts:
            if method == "POST":
                await self._upload(scope, proto)
            elif method == "GET":
                await self._list(scope, proto)
            else:
                raise MethodNotAllowed(f"{PREFIX} takes GET or POST", allow="GET, POST")
            return
        who = await caller(self._gate, scope, self._clock)
        row = await self._repo.file(who.owner, parts[0]) if len(parts) <= 2 else None
        if row is None or (len(parts) == 2 and parts[1] != "content"):
            raise NotFound(f"no file {parts[0]!r}", param="file_id", code="file_not_found")
        if len(parts) == 2:
            if method != "GET":
                raise MethodNotAllowed(f"{scope.path} takes GET", allow="GET")
            await self._content(proto, row)
        elif method == "GET":
            answer(proto, file_object(row))
        elif method == "DELETE":
            await self._repo.delete_file(who.owner, row.id)
            await asyncio.to_thread(self._disk.remove, row.id)
            answer(proto, {"id": row.id, "object": "file", "deleted": True})
        else:
            raise MethodNotAllowed(f"{scope.path} takes GET or DELETE", allow="GET, DELETE")

    async def _upload(self, scope: Scope, proto: HTTPProtocol) -> None:
        who = await caller(self._gate, scope, self._clock)
        limit = self._max_file_bytes
        boundary = files_upload.check_head(
            scope.headers.get("content-type"), scope.headers.get("content-length"), limit
        )
        file_id = new_id("file-")
        temp = self._disk.temp(file_id)
        try:
            upload = await files_upload.receive(proto, boundary, limit, temp)
            purpose = upload.fields.get("purpose", "")
            if purpose not in UPLOAD_PURPOSES:
                raise BadRequest(
                    f"purpose {purpose!r} is not one this gateway takes: use batch or user_data",
                    param="purpose",
                )
            await asyncio.to_thread(self._disk.place, temp, file_id)
        except BaseException:
            await asyncio.to_thread(temp.unlink, missing_ok=True)
            raise
        row = FileRow(file_id, who.owner, purpose, upload.filename or "upload", upload.size, self._clock())
        try:
            await self._repo.add_file(row)
        except BaseException:
            await asyncio.to_thread(self._disk.remove, file_id)
            raise
        answer(proto, file_object(row))

    async def _list(self, scope: Scope, proto: HTTPProtocol) -> None:
        who: Caller = await caller(self._gate, scope, self._clock)
        values = query(scope)
        limit = limit_of(values, _LIST_MOST, _LIST_MOST)
        order = values.get("order", "desc")
        if order not in ("asc", "desc"):
            raise BadRequest(f"order {order!r} must be asc or desc", param="order")
        rows = await self._repo.files(
            who.owner,
            limit=limit + 1,
            after=values.get("after"),
            purpose=values.get("purpose"),
            newest_first=order == "desc",
        )
        answer(proto, page([file_object(r) for r in rows[:limit]], len(rows) > limit))

    async def _content(self, proto: HTTPProtocol, row: FileRow) -> None:
        chunks: Generator[bytes] = self._disk.chunks(row.id)
        try:
            first = await asyncio.to_thread(next, chunks, b"")
        except FileNotFoundError as exc:
            raise NotFound(f"file {row.id!r} has no content any more", code="file_not_found") from exc
        transport = proto.response_stream(200, [("content-type", "application/octet-stream")], first)
        try:
            while chunk := await asyncio.to_thread(next, chunks, b""):
                await transport.send_bytes(chunk)
        finally:
            await asyncio.to_thread(chunks.close)  # the generator's file, closed

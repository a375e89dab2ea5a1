"""Receiving an upload: a multipart/form-data body streamed through python-multipart's
parser, the `file` part written to a temporary file as it arrives and the small
fields (`purpose`) kept, so a file of any size costs one read buffer of memory.

The size bound is checked on the declared length first (413 before a byte of the body
is read) and on the bytes themselves as they come (413 as soon as the bound is passed,
the rest never read).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from llmgw.errors import BadRequest, PayloadTooLarge

# What a multipart body carries besides the file: boundaries, part heads, the purpose.
ENVELOPE_BYTES = 64 * 1024
_FIELD_BYTES = 4096


@dataclass
class _Part:
    name: str = ""
    filename: str | None = None
    header_field: bytearray = field(default_factory=bytearray)
    header_value: bytearray = field(default_factory=bytearray)
    value: bytearray = field(default_factory=bytearray)


@dataclass
class Upload:
    """What arrived: the form's fields and, when there was one, the file's name and size."""

    fields: dict[str, str] = field(default_factory=dict)
    filename: str | None = None
    size: int = 0


def too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the file is over {limit} bytes, the most this gateway takes (router.batch.max_file_bytes)",
        param="file",
        code="file_too_large",
    )


class _Receiver:
    """The parser's callbacks: the current part's head, its data to the file or a field."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.upload = Upload()
        self.part = _Part()
        self.pending: list[bytes] = []
        self.seen_file = False

    def on_part_begin(self) -> None:
        self.part = _Part()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.part.header_field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.part.header_value += data[start:end]

    def on_header_end(self) -> None:
        part = self.part
        if bytes(part.header_field).lower() == b"content-disposition":
            _, options = parse_options_header(bytes(part.header_value))
            part.name = options.get(b"name", b"").decode("utf-8", "replace")
            filename = options.get(b"filename")
            part.filename = None if filename is None else filename.decode("utf-8", "replace")
        part.header_field.clear()
        part.header_value.clear()

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        part = self.part
        if part.name == "file":
            if self.seen_file and self.upload.filename != part.filename:
                raise BadRequest("the form holds more than one file: send one per upload", param="file")
            self.seen_file = True
            self.upload.filename = part.filename or "upload"
            self.upload.size += end - start
            if self.upload.size > self.limit:
                raise too_large(self.limit)
            self.pending.append(data[start:end])
        else:
            part.value += data[start:end]
            if len(part.value) > _FIELD_BYTES:
                raise BadRequest(f"the form field {part.name!r} is too long", param=part.name)

    def on_part_end(self) -> None:
        part = self.part
        if part.name == "file":
            self.seen_file = True
            self.upload.filename = self.upload.filename or part.filename or "upload"
        elif part.name:
            self.upload.fields[part.name] = part.value.decode("utf-8", "replace")


def check_head(content_type: str | None, declared: str | None, limit: int) -> bytes:
    """The form's boundary; refuses what the head alone shows to be wrong: not a
    multipart form (400), or declared longer than the limit allows (413)."""
    kind, options = parse_options_header(content_type or "")
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise BadRequest(
            "an upload is a multipart/form-data body with a file and a purpose field",
            code="invalid_content_type",
        )
    if declared is not None and declared.isdigit() and int(declared) > limit + ENVELOPE_BYTES:
        raise too_large(limit)
    return boundary


async def receive(body: AsyncIterable[bytes], boundary: bytes, limit: int, target: Path) -> Upload:
    """Parses the form as it arrives, the file's bytes going to `target` (written and
    synced to disk before this returns); a refusal leaves `target` for the caller to
    remove."""
    receiver = _Receiver(limit)
    callbacks = {
        "on_part_begin": receiver.on_part_begin,
        "on_header_field": receiver.on_header_field,
        "on_header_value": receiver.on_header_value,
        "on_header_end": receiver.on_header_end,
        "on_part_data": receiver.on_part_data,
        "on_part_end": receiver.on_part_end,
    }
    parser = MultipartParser(boundary, callbacks)  # type: ignore[arg-type]
    handle: BinaryIO = await asyncio.to_thread(target.open, "wb")
    try:
        async for chunk in body:
            try:
                parser.write(chunk)
            except MultipartParseError as exc:
                raise BadRequest(f"the multipart form is malformed: {exc}", code="invalid_multipart") from exc
            if receiver.pending:
                data, receiver.pending = b"".join(receiver.pending), []
                await asyncio.to_thread(handle.write, data)
        try:
            parser.finalize()
        except MultipartParseError as exc:
            raise BadRequest(f"the multipart form is malformed: {exc}", code="invalid_multipart") from exc
        await asyncio.to_thread(_sync, handle)
    finally:
        await asyncio.to_thread(handle.close)
    if not receiver.seen_file:
        raise BadRequest(
            "the form has no file: send it as the field 'file'", param="file", code="missing_file"
        )
    return receiver.upload


def _sync(handle: BinaryIO) -> None:
    handle.flush()
    os.fsync(handle.fileno())

"""Receiving an upload: the form parsed as it streams, the file written as it comes, and
a file over the limit refused as soon as the limit is passed, the rest never read."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from llmgw.batch.files_upload import check_head, receive
from llmgw.errors import BadRequest, PayloadTooLarge

BOUNDARY = b"b0undary"


def _form(data: bytes, purpose: str = "batch") -> bytes:
    return (
        b"--" + BOUNDARY + b"\r\n"
        b'Content-Disposition: form-data; name="purpose"\r\n\r\n' + purpose.encode() + b"\r\n"
        b"--" + BOUNDARY + b"\r\n"
        b'Content-Disposition: form-data; name="file"; filename="in.jsonl"\r\n'
        b"Content-Type: application/jsonl\r\n\r\n" + data + b"\r\n"
        b"--" + BOUNDARY + b"--\r\n"
    )


class Chunks:
    """The body in pieces, counting how many were taken."""

    def __init__(self, body: bytes, size: int) -> None:
        self.pieces = [body[i : i + size] for i in range(0, len(body), size)]
        self.taken = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            self.taken += 1
            yield piece


def test_the_file_goes_to_disk_and_the_purpose_is_read(tmp_path: Path) -> None:
    data = b'{"custom_id": "a"}\n' * 1000
    chunks = Chunks(_form(data), 777)
    upload = asyncio.run(receive(chunks, BOUNDARY, 1 << 20, tmp_path / "f"))
    assert (upload.fields, upload.filename, upload.size) == ({"purpose": "batch"}, "in.jsonl", len(data))
    assert (tmp_path / "f").read_bytes() == data


def test_a_file_over_the_limit_is_refused_before_the_rest_is_read(tmp_path: Path) -> None:
    chunks = Chunks(_form(b"z" * 100_000), 1000)
    with pytest.raises(PayloadTooLarge) as refused:
        asyncio.run(receive(chunks, BOUNDARY, 10_000, tmp_path / "f"))
    assert "max_file_bytes" in refused.value.message
    assert chunks.taken < 15 < len(chunks.pieces)


def test_the_head_alone_refuses_a_declared_length_far_over_and_a_non_form() -> None:
    content_type = "multipart/form-data; boundary=" + BOUNDARY.decode()
    assert check_head(content_type, "5000", 10_000) == BOUNDARY
    with pytest.raises(PayloadTooLarge):
        check_head(content_type, str(10_000_000), 10_000)
    with pytest.raises(BadRequest):
        check_head("application/json", "10", 10_000)


def test_a_form_without_a_file_is_400(tmp_path: Path) -> None:
    body = (
        b"--"
        + BOUNDARY
        + b'\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--'
        + BOUNDARY
        + b"--\r\n"
    )
    with pytest.raises(BadRequest) as refused:
        asyncio.run(receive(Chunks(body, 50), BOUNDARY, 1000, tmp_path / "f"))
    assert refused.value.code == "missing_file"

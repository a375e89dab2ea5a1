"""Fetching weights from a local HTTP server standing in for the mirror: whole files,
resumed files after a dropped connection or an agent restart, checksums checked, and
a file already fetched not fetched again.

The server is a few lines of raw HTTP on 127.0.0.1 so that a test decides exactly how
many bytes go out before the connection is cut.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest

from llmgw.agent.weights import Fetcher, RemoteFile, plan_weights
from llmgw.catalog.parts import Origin, OriginFile
from llmgw.errors import ChecksumMismatch, WeightsError

DATA = bytes(range(256)) * 4096 * 3  # 3 MiB, a few chunks
SHA = hashlib.sha256(DATA).hexdigest()


@dataclass
class FileServer:
    """Serves `files` by path, honouring `Range: bytes=N-` unless told not to."""

    files: dict[str, bytes]
    drop_after: list[int] = field(default_factory=list)
    """Bytes of body sent before cutting the connection, one entry per request, in order."""
    stall_after: list[int] = field(default_factory=list)
    """Bytes of body sent before falling silent (until the client hangs up), per request."""
    honour_range: bool = True
    requests: list[tuple[str, str]] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        line, *header_lines = head.split("\r\n")
        path = line.split(" ")[1]
        headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
        self.requests.append((path, headers.get("range", "")))
        data = self.files.get(path)
        if data is None:
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        status, extra, body = "200 OK", "", data
        wanted = headers.get("range", "")
        if wanted and self.honour_range:
            start = int(wanted.removeprefix("bytes=").split("-")[0])
            if start >= len(data):
                status, extra, body = (
                    "416 Range Not Satisfiable",
                    f"Content-Range: bytes */{len(data)}\r\n",
                    b"",
                )
            else:
                status, body = "206 Partial Content", data[start:]
                extra = f"Content-Range: bytes {start}-{len(data) - 1}/{len(data)}\r\n"
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n".encode()
        )
        stall = self.stall_after.pop(0) if self.stall_after else None
        if stall is not None:
            writer.write(body[:stall])
            await writer.drain()
            await reader.read()  # silence until the client gives up and closes
            writer.close()
            return
        cut = self.drop_after.pop(0) if self.drop_after else None
        if cut is not None:
            writer.write(body[:cut])
            await writer.drain()
            writer.transport.abort()
            return
        writer.write(body)
        await writer.drain()
        writer.close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def _serve(server: FileServer, test: Callable[[Fetcher], Awaitable[None]], **fetcher_args: float) -> None:
    async def main() -> None:
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        server.port = listener.sockets[0].getsockname()[1]
        try:
            async with aiohttp.ClientSession() as session:
                await test(Fetcher(session, retry_pause_s=0.0, **fetcher_args))  # type: ignore[arg-type]
        finally:
            listener.close()
            await listener.wait_closed()

    asyncio.run(main())


def test_a_file_is_fetched_verified_and_not_fetched_again(tmp_path: Path) -> None:
    server = FileServer({"/m.gguf": DATA})
    dest = tmp_path / "w" / "m.gguf"

    async def test(fetcher: Fetcher) -> None:
        remote = RemoteFile(url=server.url("/m.gguf"), name="m.gguf", sha256=SHA, size_bytes=len(DATA))
        assert await fetcher.fetch(remote, dest) == dest
        assert await fetcher.fetch(remote, dest) == dest

    _serve(server, test)
    assert dest.read_bytes() == DATA
    assert len(server.requests) == 1, "the second time the verified file was used as it was"
    assert (tmp_path / "w" / ".m.gguf.verified").exists()
    assert not (tmp_path / "w" / "m.gguf.part").exists()


def test_a_stalled_download_is_resumed_where_it_stopped(tmp_path: Path) -> None:
    server = FileServer({"/m.gguf": DATA}, stall_after=[1_000_000, 500_000])
    dest = tmp_path / "m.gguf"
    seen: list[tuple[int, int | None]] = []

    async def test(fetcher: Fetcher) -> None:
        remote = RemoteFile(url=server.url("/m.gguf"), name="m.gguf", sha256=SHA)
        await fetcher.fetch(remote, dest, lambda name, done, total: seen.append((done, total)))

    _serve(server, test, progress_interval_s=0.0, read_timeout_s=0.3)
    assert dest.read_bytes() == DATA
    assert [r for _, r in server.requests] == ["", "bytes=1000000-", "bytes=1500000-"]
    assert seen[-1] == (len(DATA), len(DATA))
    done = [d for d, _ in seen]
    assert done == sorted(done), "progress only goes forward across resumes"


def test_a_dropped_connection_is_resumed(tmp_path: Path) -> None:
    server = FileServer({"/m.gguf": DATA}, drop_after=[1_000_000, 500_000])
    dest = tmp_path / "m.gguf"

    async def test(fetcher: Fetcher) -> None:
        await fetcher.fetch(RemoteFile(url=server.url("/m.gguf"), name="m.gguf", sha256=SHA), dest)

    _serve(server, test)
    assert dest.read_bytes() == DATA
    offsets = [int(r[6:-1]) if r else 0 for _, r in server.requests]
    assert len(offsets) == 3
    # How much of a cut stream reaches the disk depends on when the cut is seen; each
    # try starts where the file on disk ends, never before.
    assert offsets == sorted(offsets)


def test_a_download_left_by_a_previous_agent_is_resumed(tmp_path: Path) -> None:
    server = FileServer({"/m.gguf": DATA})
    dest = tmp_path / "m.gguf"
    (tmp_path / "m.gguf.part").write_bytes(DATA[:123_456])

    async def test(fetcher: Fetcher) -> None:
        await fetcher.fetch(RemoteFile(url=server.url("/m.gguf"), name="m.gguf", sha256=SHA), dest)

    _serve(server, test)
    assert server.requests == [("/m.gguf", "bytes=123456-")]
    assert dest.read_bytes() == DATA


def test_a_server_that_ignores_ranges_gets_the_file_from_the_start(tmp_path: Path) -> None:
    server = FileServer({"/m.gguf": DATA}, honour_range=False)
    dest = tmp_path / "m.gguf"
    (tmp_path / "m.gguf.part").write_bytes(b"stale bytes that must not stay")

    async def test(fetcher: Fetcher) -> None:
        await fetcher.fetch(RemoteFile(url=server.url("/m.gguf"), name="m.gguf", sha256=SHA), dest)

    _serve(server, test)
    assert dest.read_bytes() == DATA


def test_a_complete_partial_file_is_finished_without_a_body(tmp_path: Path) -> None:
    server = FileServer({"/m.gguf": DATA})
    dest = tmp_path / "m.gguf"
    (tmp_path / "m.gguf.part").write_bytes(DATA)

    async def test(fetcher: Fetcher) -> None:
        await fetcher.fetch(RemoteFile(url=server.url("/m.gguf"), name="m.gguf", sha256=SHA), dest)

    _serve(server, test)
    assert server.requests == [("/m.gguf", f"bytes={len(DATA)}-")]
    assert dest.read_bytes() == DATA


def test_a_checksum_mismatch_is_refused_and_nothing_kept(tmp_path: Path) -> None:
    server = FileServer({"/m.gguf": DATA})
    dest = tmp_path / "m.gguf"

    async def test(fetcher: Fetcher) -> None:
        remote = RemoteFile(url=server.url("/m.gguf"), name="m.gguf", sha256="0" * 64)
        with pytest.raises(ChecksumMismatch, match=f"has SHA-256 {SHA}, and the model's origin gives 0000"):
            await fetcher.fetch(remote, dest)

    _serve(server, test)
    assert not dest.exists()
    assert not (tmp_path / "m.gguf.part").exists(), "a bad download is not resumed from"


def test_a_file_changed_on_disk_is_fetched_again(tmp_path: Path) -> None:
    server = FileServer({"/m.gguf": DATA})
    dest = tmp_path / "m.gguf"
    dest.write_bytes(b"x" * len(DATA))

    async def test(fetcher: Fetcher) -> None:
        await fetcher.fetch(RemoteFile(url=server.url("/m.gguf"), name="m.gguf", sha256=SHA), dest)

    _serve(server, test)
    assert dest.read_bytes() == DATA
    assert len(server.requests) == 1


def test_a_missing_file_is_not_retried(tmp_path: Path) -> None:
    server = FileServer({})

    async def test(fetcher: Fetcher) -> None:
        with pytest.raises(WeightsError, match="the server answered 404"):
            await fetcher.fetch(RemoteFile(url=server.url("/gone.gguf"), name="gone.gguf"), tmp_path / "g")

    _serve(server, test)
    assert len(server.requests) == 1


def test_a_server_that_keeps_dropping_ends_in_an_error_after_so_many_tries(tmp_path: Path) -> None:
    server = FileServer({"/m.gguf": DATA}, drop_after=[0, 0, 0, 0])

    async def test(fetcher: Fetcher) -> None:
        with pytest.raises(WeightsError, match="failed 3 times"):
            await fetcher.fetch(RemoteFile(url=server.url("/m.gguf"), name="m.gguf"), tmp_path / "m.gguf")

    _serve(server, test, attempts=3)
    assert len(server.requests) == 3


def test_a_repository_is_fetched_through_the_mirror_and_llamacpp_gets_its_gguf(tmp_path: Path) -> None:
    config = b'{"arch": "llama"}'
    server = FileServer({"/org/smol/config.json": config, "/org/smol/smol-q4.gguf": DATA})
    origin = Origin(
        repo="org/smol",
        files=(OriginFile(path="config.json"), OriginFile(path="smol-q4.gguf", sha256=SHA, bytes=len(DATA))),
    )
    found: list[Path] = []

    async def test(fetcher: Fetcher) -> None:
        plan = plan_weights(
            "org/smol", weights_dir=tmp_path, mirror_url=server.url(""), origin=origin, exists=lambda _: False
        )
        found.append(await fetcher.resolve(plan, "llamacpp"))
        found.append(await fetcher.resolve(plan, "vllm"))

    _serve(server, test)
    assert found == [tmp_path / "org--smol" / "smol-q4.gguf", tmp_path / "org--smol"]
    assert (tmp_path / "org--smol" / "config.json").read_bytes() == config
    assert len(server.requests) == 2, "the second resolve found both files in place"

"""Weights: where a replica's model is on this node, fetched there first when it is not.

A source (a profile's `model_path`, an adapter's path) is read as:

- a path that exists on this node, file or directory: used as it is;
- `http://` or `https://` URL: that one file, fetched; a Hugging Face `/resolve/` URL
  goes through the mirror instead when the cluster has one, since offline nodes
  reach nothing else;
- anything else: a path on the mirror, or a Hugging Face id (`owner/name`, optionally
  written `hf:owner/name`), fetched through the mirror, whose files are laid out as
  `<mirror>/<owner>/<name>/<path in the repository>`. A repository is fetched file by
  file as the catalog's Origin lists them; `owner/name/file.gguf` is that one file.
  There is no other road to Hugging Face: nodes need not reach the internet.

Fetched files land in `<weights_dir>/<owner>--<name>/` (a URL's host and directories
joined the same way). A download is written to `<file>.part` and resumed from where
it stopped with an HTTP Range request, after a broken connection and after an agent
restart alike; it becomes `<file>` only once its size and, where the Origin gives one,
its SHA-256 match. A verified file is marked (`.<file>.verified`) so that a restart
does not read tens of gigabytes to check it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import aiohttp
import orjson

from llmgw.catalog.parts import Origin
from llmgw.errors import ChecksumMismatch, WeightsError

log = logging.getLogger(__name__)

HF_RESOLVE = re.compile(r"^https?://(?:huggingface\.co|hf\.co)/([^/]+)/([^/]+)/resolve/[^/]+/(.+)$")
PART_SUFFIX = ".part"
CHUNK_BYTES = 1 << 20
HASH_BLOCK_BYTES = 8 << 20

Progress = Callable[[str, int, int | None], None]
"""Told a file's name, the bytes it has and its size when known, as a download goes."""


@dataclass(frozen=True)
class RemoteFile:
    """One file to fetch."""

    url: str
    name: str
    """Its path under the destination directory."""
    sha256: str = ""
    size_bytes: int = 0


@dataclass(frozen=True)
class WeightsPlan:
    """How a source becomes a path on this node."""

    source: str
    local: Path | None = None
    """Set when the source is on the node already: nothing to fetch."""
    directory: Path | None = None
    files: tuple[RemoteFile, ...] = ()
    single_file: bool = False
    """The model is the one file, not the directory (a GGUF, a URL)."""

    @property
    def fetches(self) -> bool:
        return self.local is None


def _dir_name(parts: Iterable[str]) -> str:
    """A directory name from a repository's or URL's parts: `owner--name`."""
    cleaned = [re.sub(r"[^A-Za-z0-9._-]", "_", part) for part in parts if part and part not in (".", "..")]
    if not cleaned:
        raise WeightsError("the source names no file or repository")
    return "--".join(cleaned)


def _checksum(origin: Origin | None, path: str) -> tuple[str, int]:
    """What the Origin says of the file at `path` in the repository: sha256 and size."""
    if origin is None:
        return "", 0
    for item in origin.files:
        if item.path == path or item.path.endswith("/" + path) or path.endswith("/" + item.path):
            return item.sha256.lower(), item.bytes
    return "", 0


def _safe_relative(path: str, source: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise WeightsError(f"source {source!r}: file {path!r} would land outside the weights directory")
    return str(pure)


def plan_weights(
    source: str,
    *,
    weights_dir: Path,
    mirror_url: str = "",
    origin: Origin | None = None,
    exists: Callable[[str], bool] = os.path.exists,
) -> WeightsPlan:
    """Where the weights of `source` are, or come from; pure but for `exists`. Raises
    WeightsError, naming the source and the fix, for one that cannot be had here."""
    text = source.strip()
    if not text:
        raise WeightsError("the profile names no weights: give the model a source")
    mirror = mirror_url.rstrip("/")
    if text.startswith(("http://", "https://")):
        return _plan_url(text, weights_dir, mirror, origin)
    registry = text.removeprefix("hf:")
    if registry == text and exists(os.path.expanduser(text)):
        return WeightsPlan(source=source, local=Path(os.path.expanduser(text)))
    if not mirror:
        raise WeightsError(
            f"weights {source!r} are not on this node and the cluster has no mirror to fetch them from:"
            " copy them here, give a URL, or set offline.mirror"
        )
    parts = [p for p in registry.strip("/").split("/") if p]
    if len(parts) < 2:
        raise WeightsError(f"weights {source!r}: give owner/name, a mirror path or a URL")
    directory = weights_dir / _dir_name(parts[:2])
    base = f"{mirror}/{parts[0]}/{parts[1]}"
    if len(parts) > 2 and not registry.endswith("/"):
        inner = _safe_relative("/".join(parts[2:]), source)
        sha, size = _checksum(origin, inner)
        remote = RemoteFile(
            url=f"{base}/{urllib.parse.quote(inner)}", name=inner, sha256=sha, size_bytes=size
        )
        return WeightsPlan(source=source, directory=directory, files=(remote,), single_file=True)
    prefix = "/".join(parts[2:])
    listed = [f for f in (origin.files if origin else ()) if not prefix or f.path.startswith(prefix + "/")]
    if not listed:
        raise WeightsError(
            f"weights {source!r}: a repository is fetched by the file list of the model's origin, and it"
            " lists none: add origin.files, or name the one file (owner/name/file.gguf)"
        )
    files = tuple(
        RemoteFile(
            url=f"{base}/{urllib.parse.quote(_safe_relative(f.path, source))}",
            name=_safe_relative(f.path[len(prefix) + 1 :] if prefix else f.path, source),
            sha256=f.sha256.lower(),
            size_bytes=f.bytes,
        )
        for f in listed
    )
    return WeightsPlan(source=source, directory=directory, files=files)


def _plan_url(url: str, weights_dir: Path, mirror: str, origin: Origin | None) -> WeightsPlan:
    match = HF_RESOLVE.match(url)
    if match and mirror:
        owner, name, inner = match.groups()
        return plan_weights(
            f"hf:{owner}/{name}/{inner}", weights_dir=weights_dir, mirror_url=mirror, origin=origin
        )
    parts = urllib.parse.urlsplit(url)
    path = PurePosixPath(urllib.parse.unquote(parts.path))
    if not path.name or parts.path.endswith("/"):
        raise WeightsError(f"weights {url}: a URL names one file; this one ends in '/'")
    directory = weights_dir / _dir_name([parts.netloc.replace(":", "_"), *path.parent.parts[1:]])
    sha, size = _checksum(origin, path.name)
    remote = RemoteFile(url=url, name=path.name, sha256=sha, size_bytes=size)
    return WeightsPlan(source=url, directory=directory, files=(remote,), single_file=True)


def pick_gguf(names: Sequence[str], source: str) -> str:
    """The file llama-server loads out of a repository's files: its one GGUF, or the
    first shard of a split one; a projector (mmproj) is never the model."""
    ggufs = sorted(n for n in names if n.endswith(".gguf") and not PurePosixPath(n).name.startswith("mmproj"))
    firsts = [n for n in ggufs if re.search(r"-0+1-of-\d+\.gguf$", n)]
    if len(ggufs) == 1:
        return ggufs[0]
    if len(firsts) == 1:
        return firsts[0]
    if not ggufs:
        raise WeightsError(f"weights {source!r} hold no .gguf file, which llama.cpp needs")
    raise WeightsError(
        f"weights {source!r} hold {len(ggufs)} .gguf files: name the one to load in the source"
    )


# --- fetching ---------------------------------------------------------------------------


def sha256_of(path: Path) -> str:
    """The file's SHA-256, read in blocks (blocking: run it in a thread)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(HASH_BLOCK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def _marker(path: Path) -> Path:
    return path.with_name(f".{path.name}.verified")


def _write_marker(path: Path, sha256: str) -> None:
    stat = path.stat()
    mark = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    _marker(path).write_bytes(orjson.dumps(mark))


def _marked_as(path: Path) -> str:
    """The SHA-256 a marker vouches for, while the file is as it was when marked."""
    try:
        mark = orjson.loads(_marker(path).read_bytes())
        stat = path.stat()
    except (OSError, orjson.JSONDecodeError):
        return ""
    if mark.get("size") != stat.st_size or mark.get("mtime_ns") != stat.st_mtime_ns:
        return ""
    return str(mark.get("sha256", ""))


def _content_range_total(header: str | None) -> int | None:
    """N of `Content-Range: bytes a-b/N` or `bytes */N`."""
    if not header or "/" not in header:
        return None
    total = header.rsplit("/", 1)[1].strip()
    return int(total) if total.isdigit() else None


class _Retry(Exception):
    """A download attempt ended early and may be resumed."""


class Fetcher:
    """Downloads weights files, resuming broken downloads, one download per file at a
    time however many replicas want it."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        attempts: int = 6,
        retry_pause_s: float = 0.5,
        read_timeout_s: float = 120.0,
        progress_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.session = session
        self.attempts = attempts
        self.retry_pause_s = retry_pause_s
        self.read_timeout_s = read_timeout_s
        self.progress_interval_s = progress_interval_s
        self.clock = clock
        self.sleep = sleep
        self._locks: dict[Path, asyncio.Lock] = {}

    async def resolve(self, plan: WeightsPlan, engine: str, progress: Progress | None = None) -> Path:
        """The path the engine loads: the local source, or the fetched file or directory
        (for llama.cpp, the GGUF in it)."""
        if plan.local is not None:
            return plan.local
        assert plan.directory is not None
        for remote in plan.files:
            await self.fetch(remote, plan.directory / remote.name, progress)
        if plan.single_file:
            return plan.directory / plan.files[0].name
        if engine == "llamacpp":
            return plan.directory / pick_gguf([f.name for f in plan.files], plan.source)
        return plan.directory

    async def fetch(self, remote: RemoteFile, dest: Path, progress: Progress | None = None) -> Path:
        """`dest`, downloaded from `remote.url` unless it is there and checks out."""
        lock = self._locks.setdefault(dest, asyncio.Lock())
        async with lock:
            if await asyncio.to_thread(self._present, remote, dest):
                return dest
            await asyncio.to_thread(dest.parent.mkdir, parents=True, exist_ok=True)
            part = dest.with_name(dest.name + PART_SUFFIX)
            total = await self._download(remote, part, progress)
            await self._verify(remote, part, total)
            await asyncio.to_thread(os.replace, part, dest)
            if remote.sha256:
                await asyncio.to_thread(_write_marker, dest, remote.sha256)
            log.info("weights: fetched %s into %s", remote.url, dest)
            return dest

    def _present(self, remote: RemoteFile, dest: Path) -> bool:
        if not dest.is_file():
            return False
        if remote.size_bytes and dest.stat().st_size != remote.size_bytes:
            return False
        if not remote.sha256 or _marked_as(dest) == remote.sha256:
            return True
        if sha256_of(dest) == remote.sha256:
            _write_marker(dest, remote.sha256)
            return True
        log.warning("weights: %s does not match its checksum; fetching it again", dest)
        return False

    async def _download(self, remote: RemoteFile, part: Path, progress: Progress | None) -> int | None:
        last_error = ""
        for attempt in range(1, self.attempts + 1):
            try:
                return await self._attempt(remote, part, progress)
            except _Retry as exc:
                last_error = str(exc)
                log.warning("weights: %s (attempt %d of %d); resuming", exc, attempt, self.attempts)
            except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, TimeoutError) as exc:
                last_error = f"{remote.url}: {exc or type(exc).__name__}"
                log.warning("weights: %s (attempt %d of %d); resuming", last_error, attempt, self.attempts)
            if attempt < self.attempts:
                await self.sleep(self.retry_pause_s)
        raise WeightsError(f"fetching {remote.url} failed {self.attempts} times; the last: {last_error}")

    async def _attempt(self, remote: RemoteFile, part: Path, progress: Progress | None) -> int | None:
        offset = part.stat().st_size if part.exists() else 0
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        # No bound on the whole download, which may take hours; a mirror that stops
        # sending for read_timeout_s is given up on and the download resumed.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=self.read_timeout_s)
        async with self.session.get(remote.url, headers=headers, timeout=timeout) as response:
            if response.status == 416 and offset:
                whole = _content_range_total(response.headers.get("Content-Range"))
                if whole == offset:
                    return whole
                await asyncio.to_thread(os.truncate, part, 0)
                raise _Retry(f"{remote.url}: the partial file is longer than the file; starting over")
            if response.status >= 500 or response.status == 429:
                raise _Retry(f"{remote.url} answered {response.status}")
            if response.status not in (200, 206):
                raise WeightsError(f"fetching {remote.url}: the server answered {response.status}")
            resumed = response.status == 206
            if resumed:
                total = _content_range_total(response.headers.get("Content-Range"))
            else:
                offset = 0  # the server ignored the range: the whole file comes
                total = response.content_length
            handle = await asyncio.to_thread(part.open, "ab" if resumed else "wb")
            try:
                done = await self._copy(response, handle, offset, total, remote.name, progress)
            finally:
                await asyncio.to_thread(handle.close)
        if total is not None and done < total:
            raise _Retry(f"{remote.url}: the connection ended at {done} of {total} bytes")
        return total

    async def _copy(
        self,
        response: aiohttp.ClientResponse,
        handle: BinaryIO,
        done: int,
        total: int | None,
        name: str,
        progress: Progress | None,
    ) -> int:
        # Bytes are taken as they arrive and written a megabyte at a time; what has
        # arrived when the connection breaks is still written, so the resume starts
        # after it (aiohttp drops whatever it buffered once the stream has failed).
        buffer = bytearray()
        reported = self.clock()
        try:
            async for chunk in response.content.iter_any():
                buffer += chunk
                done += len(chunk)
                if len(buffer) >= CHUNK_BYTES:
                    await asyncio.to_thread(handle.write, bytes(buffer))
                    buffer.clear()
                now = self.clock()
                if progress is not None and now - reported >= self.progress_interval_s:
                    progress(name, done, total)
                    reported = now
        finally:
            if buffer:
                await asyncio.to_thread(handle.write, bytes(buffer))
            if progress is not None:
                progress(name, done, total)
        return done

    async def _verify(self, remote: RemoteFile, part: Path, total: int | None) -> None:
        size = (await asyncio.to_thread(part.stat)).st_size
        expected = remote.size_bytes or total
        if expected and size != expected:
            with contextlib.suppress(FileNotFoundError):
                await asyncio.to_thread(part.unlink)
            raise WeightsError(f"fetched {remote.url} is {size} bytes and should be {expected}")
        if not remote.sha256:
            return
        actual = await asyncio.to_thread(sha256_of, part)
        if actual != remote.sha256:
            # A resumed download that went wrong cannot be mended: the next try starts over.
            with contextlib.suppress(FileNotFoundError):
                await asyncio.to_thread(part.unlink)
            raise ChecksumMismatch(
                f"fetched {remote.url} has SHA-256 {actual}, and the model's origin gives {remote.sha256}:"
                " the mirror's copy differs from what was published; fetch it into the mirror again"
            )

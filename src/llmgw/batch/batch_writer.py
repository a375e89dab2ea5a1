"""Group commit of a batch's results: lines that finish while the disk is busy with
the last group are written and synced together in the next, so a batch pays two
fsyncs per group rather than per line, and a line still counts only once its result
and record are on disk (llmgw.batch.batch_progress)."""

from __future__ import annotations

import asyncio

from llmgw.batch.batch_progress import Progress

_Entry = tuple[int, bool, bytes, "asyncio.Future[None]"]


class ResultWriter:
    """The one writer of a batch's progress while its lines run."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._queue: list[_Entry] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._task = asyncio.create_task(self._run(), name="batch-writer")

    async def put(self, index: int, ok: bool, line: bytes) -> None:
        """Queues one line's result; returns once it is on disk. A caller cancelled while
        waiting leaves its result queued: it is written all the same (the line is done)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((index, ok, line, future))
        self._wake.set()
        await asyncio.shield(future)

    async def close(self) -> None:
        """Writes what is queued and stops; raises what writing failed with."""
        self._closing = True
        self._wake.set()
        await self._task

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                group, self._queue = self._queue, []
                try:
                    await asyncio.to_thread(
                        self._progress.record_many, [(i, ok, line) for i, ok, line, _ in group]
                    )
                except BaseException as exc:
                    for *_, future in (*group, *self._queue):
                        if not future.done():
                            future.set_exception(exc)
                            future.exception()  # a cancelled waiter cannot retrieve it
                    raise
                for *_, future in group:
                    if not future.done():
                        future.set_result(None)
            if self._closing:
                return

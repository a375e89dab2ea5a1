"""Files and batches of the OpenAI Files and Batch APIs in the store (`batch_files`,
`batch_jobs`). llmgw.batch decides; this module only speaks SQL.

Every read and change is by owner as well as id, so one tenant's id in another's hands
finds nothing (answered 404 above).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.store import schema
from llmgw.store.engine import transaction

_FILES = schema.batch_files
_JOBS = schema.batch_jobs
# Statuses of a batch still to be run or finished (llmgw.batch.batch_objects names them).
_UNFINISHED = ("validating", "in_progress", "finalizing", "cancelling")


@dataclass(frozen=True)
class FileRow:
    """One uploaded (or gateway-written) file's metadata."""

    id: str
    owner: str
    purpose: str
    filename: str
    bytes: int
    created_at: float
    expires_at: float | None = None


@dataclass(frozen=True)
class BatchRow:
    """One batch: who owns it, the key it runs as, its status and the rest as JSON."""

    id: str
    owner: str
    key_hash: str
    status: str
    body: str
    created_at: float
    updated_at: float


def _file(row: sa.Row[tuple[object, ...]]) -> FileRow:
    m = row._mapping
    expires = m["expires_at"]
    return FileRow(
        id=str(m["id"]),
        owner=str(m["owner"]),
        purpose=str(m["purpose"]),
        filename=str(m["filename"]),
        bytes=int(m["bytes"]),
        created_at=float(m["created_at"]),
        expires_at=None if expires is None else float(expires),
    )


def _batch(row: sa.Row[tuple[object, ...]]) -> BatchRow:
    m = row._mapping
    return BatchRow(
        id=str(m["id"]),
        owner=str(m["owner"]),
        key_hash=str(m["key_hash"]),
        status=str(m["status"]),
        body=str(m["body"]),
        created_at=float(m["created_at"]),
        updated_at=float(m["updated_at"]),
    )


class BatchFilesRepo:
    """Queries over files and batches."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    # --- files -------------------------------------------------------------------------

    async def add_file(self, row: FileRow) -> None:
        async with transaction(self._engine) as conn:
            await conn.execute(
                _FILES.insert().values(
                    id=row.id,
                    owner=row.owner,
                    purpose=row.purpose,
                    filename=row.filename,
                    bytes=row.bytes,
                    created_at=row.created_at,
                    expires_at=row.expires_at,
                )
            )

    async def file(self, owner: str, file_id: str) -> FileRow | None:
        query = sa.select(_FILES).where((_FILES.c.id == file_id) & (_FILES.c.owner == owner))
        async with transaction(self._engine) as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _file(row)

    async def files(
        self, owner: str, *, limit: int, after: str | None, purpose: str | None, newest_first: bool
    ) -> list[FileRow]:
        """Up to `limit` of the owner's files, ordered by creation (then id), those
        after the file `after` in that order."""
        query = sa.select(_FILES).where(_FILES.c.owner == owner)
        if purpose:
            query = query.where(_FILES.c.purpose == purpose)
        created, ident = _FILES.c.created_at, _FILES.c.id
        if after is not None:
            anchor = await self.file(owner, after)
            if anchor is not None:
                if newest_first:
                    query = query.where(
                        (created < anchor.created_at) | ((created == anchor.created_at) & (ident < anchor.id))
                    )
                else:
                    query = query.where(
                        (created > anchor.created_at) | ((created == anchor.created_at) & (ident > anchor.id))
                    )
        order = (created.desc(), ident.desc()) if newest_first else (created, ident)
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query.order_by(*order).limit(limit))).all()
        return [_file(r) for r in rows]

    async def delete_file(self, owner: str, file_id: str) -> bool:
        async with transaction(self._engine) as conn:
            result = await conn.execute(
                _FILES.delete().where((_FILES.c.id == file_id) & (_FILES.c.owner == owner))
            )
        return result.rowcount > 0

    async def expired_files(self, now: float, limit: int) -> list[FileRow]:
        query = (
            sa.select(_FILES)
            .where(_FILES.c.expires_at.is_not(None) & (_FILES.c.expires_at <= now))
            .order_by(_FILES.c.expires_at)
            .limit(limit)
        )
        async with transaction(self._engine) as conn:
            return [_file(r) for r in (await conn.execute(query)).all()]

    # --- batches -----------------------------------------------------------------------

    async def add_batch(self, row: BatchRow) -> None:
        async with transaction(self._engine) as conn:
            await conn.execute(
                _JOBS.insert().values(
                    id=row.id,
                    owner=row.owner,
                    key_hash=row.key_hash,
                    status=row.status,
                    body=row.body,
                    created_at=row.created_at,
                    updated_at=row.updated_at,
                )
            )

    async def batch(self, owner: str | None, batch_id: str) -> BatchRow | None:
        """The batch by id, inside `owner` (None: whoever owns it, for the runner)."""
        query = sa.select(_JOBS).where(_JOBS.c.id == batch_id)
        if owner is not None:
            query = query.where(_JOBS.c.owner == owner)
        async with transaction(self._engine) as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _batch(row)

    async def batches(self, owner: str, *, limit: int, after: str | None) -> list[BatchRow]:
        """Up to `limit` of the owner's batches, newest first, those after `after`."""
        query = sa.select(_JOBS).where(_JOBS.c.owner == owner)
        created, ident = _JOBS.c.created_at, _JOBS.c.id
        if after is not None:
            anchor = await self.batch(owner, after)
            if anchor is not None:
                query = query.where(
                    (created < anchor.created_at) | ((created == anchor.created_at) & (ident < anchor.id))
                )
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query.order_by(created.desc(), ident.desc()).limit(limit))).all()
        return [_batch(r) for r in rows]

    async def save_batch(self, batch_id: str, status: str, body: str, now: float) -> None:
        async with transaction(self._engine) as conn:
            await conn.execute(
                _JOBS.update().where(_JOBS.c.id == batch_id).values(status=status, body=body, updated_at=now)
            )

    async def claim(self, batch_id: str, runner: str, now: float, ttl_s: float, *, force: bool) -> bool:
        """Makes `runner` the gateway running an unfinished batch until `now + ttl_s`,
        unless another holds an unexpired lease (`force`: take it regardless, where no
        other gateway shares the store); whether it did."""
        free = (_JOBS.c.runner.is_(None)) | (_JOBS.c.runner == runner) | (_JOBS.c.lease_until < now)
        condition = (_JOBS.c.id == batch_id) & _JOBS.c.status.in_(list(_UNFINISHED))
        if not force:
            condition = condition & free
        async with transaction(self._engine) as conn:
            result = await conn.execute(
                _JOBS.update().where(condition).values(runner=runner, lease_until=now + ttl_s)
            )
        return result.rowcount > 0

    async def renew(self, batch_id: str, runner: str, until: float) -> bool:
        """Extends the lease `runner` holds; False once another gateway took it over."""
        async with transaction(self._engine) as conn:
            result = await conn.execute(
                _JOBS.update()
                .where((_JOBS.c.id == batch_id) & (_JOBS.c.runner == runner))
                .values(lease_until=until)
            )
        return result.rowcount > 0

    async def release(self, batch_id: str, runner: str) -> None:
        """Gives the lease up (a gateway stopping), so another may take the batch at once."""
        async with transaction(self._engine) as conn:
            await conn.execute(
                _JOBS.update()
                .where((_JOBS.c.id == batch_id) & (_JOBS.c.runner == runner))
                .values(runner=None, lease_until=None)
            )

    async def batches_in(self, statuses: Sequence[str]) -> list[BatchRow]:
        """Every batch in one of `statuses` (those a starting gateway takes up again)."""
        query = sa.select(_JOBS).where(_JOBS.c.status.in_(list(statuses))).order_by(_JOBS.c.created_at)
        async with transaction(self._engine) as conn:
            return [_batch(r) for r in (await conn.execute(query)).all()]

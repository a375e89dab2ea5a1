"""API keys in the store: hashes and who they belong to, never the keys themselves."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.errors import StoreMissing
from llmgw.store import schema
from llmgw.store.engine import transaction
from llmgw.store.rows import KeyRow

_KEYS = schema.api_keys


def key_from_row(row: sa.RowMapping) -> KeyRow:
    return KeyRow(
        id=row["id"],
        hash=row["hash"],
        name=row["name"],
        project_id=row["project_id"],
        user_id=row["user_id"],
        band=row["band"],
        rpm=row["rpm"],
        tpm=row["tpm"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        updated_at=row["updated_at"],
    )


class KeyRepo:
    """Queries over API keys."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create(self, key: KeyRow) -> KeyRow:
        async with transaction(self._engine) as conn:
            await conn.execute(
                _KEYS.insert().values(
                    id=key.id,
                    hash=key.hash,
                    name=key.name,
                    project_id=key.project_id,
                    user_id=key.user_id,
                    band=key.band,
                    rpm=key.rpm,
                    tpm=key.tpm,
                    created_at=key.created_at,
                    expires_at=key.expires_at,
                    revoked_at=key.revoked_at,
                    updated_at=key.updated_at,
                )
            )
        return key

    async def by_hash(self, key_hash: str) -> KeyRow | None:
        async with transaction(self._engine) as conn:
            row = (await conn.execute(_KEYS.select().where(_KEYS.c.hash == key_hash))).mappings().first()
        return None if row is None else key_from_row(row)

    async def get(self, key_id: str) -> KeyRow:
        async with transaction(self._engine) as conn:
            row = (await conn.execute(_KEYS.select().where(_KEYS.c.id == key_id))).mappings().first()
        if row is None:
            raise StoreMissing(f"key {key_id!r} does not exist")
        return key_from_row(row)

    async def find(
        self, *, project_id: str | None = None, user_id: str | None = None, include_revoked: bool = False
    ) -> list[KeyRow]:
        query = _KEYS.select().order_by(_KEYS.c.created_at, _KEYS.c.id)
        if project_id is not None:
            query = query.where(_KEYS.c.project_id == project_id)
        if user_id is not None:
            query = query.where(_KEYS.c.user_id == user_id)
        if not include_revoked:
            query = query.where(_KEYS.c.revoked_at.is_(None))
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [key_from_row(row) for row in rows]

    async def newest(self, limit: int, *, include_revoked: bool = False) -> tuple[list[KeyRow], int]:
        """The `limit` most recently made keys, newest first, and how many there are in
        all: a page of a large store without reading every row."""
        where = [] if include_revoked else [_KEYS.c.revoked_at.is_(None)]
        query = _KEYS.select().where(*where).order_by(_KEYS.c.created_at.desc(), _KEYS.c.id).limit(limit)
        counted = sa.select(sa.func.count()).select_from(_KEYS).where(*where)
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query)).mappings().all()
            total = int((await conn.execute(counted)).scalar_one())
        return [key_from_row(row) for row in rows], total

    async def active(self, now: float) -> list[KeyRow]:
        """Keys neither revoked nor expired: what a gateway loads at start."""
        query = _KEYS.select().where(
            _KEYS.c.revoked_at.is_(None), sa.or_(_KEYS.c.expires_at.is_(None), _KEYS.c.expires_at > now)
        )
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [key_from_row(row) for row in rows]

    async def changed_since(self, since: float) -> list[KeyRow]:
        async with transaction(self._engine) as conn:
            rows = (await conn.execute(_KEYS.select().where(_KEYS.c.updated_at >= since))).mappings().all()
        return [key_from_row(row) for row in rows]

    async def revoke(self, key_id: str, now: float) -> KeyRow:
        """Revokes a key (again is fine: the first time stands)."""
        async with transaction(self._engine) as conn:
            result = await conn.execute(
                _KEYS.update()
                .where(_KEYS.c.id == key_id, _KEYS.c.revoked_at.is_(None))
                .values(revoked_at=now, updated_at=now)
            )
            if result.rowcount == 0:
                exists = (await conn.execute(sa.select(_KEYS.c.id).where(_KEYS.c.id == key_id))).first()
                if exists is None:
                    raise StoreMissing(f"key {key_id!r} does not exist")
        return await self.get(key_id)

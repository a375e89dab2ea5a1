"""Browser sessions and OIDC sign-ins under way, in the store.

A session row is keyed by the SHA-256 of the cookie's token, so a copy of the store
signs nobody in; deleting rows ends sessions on every gateway sharing the store. A
sign-in under way is keyed by the hash of its `state` and deleted as it is read, in one
statement, so a replayed `state` finds nothing even when two gateways race for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.store import schema
from llmgw.store.engine import transaction


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A browser session as stored, with what its person's row says now."""

    id_hash: str
    user_id: str
    csrf_token: str
    created_at: float
    last_seen_at: float
    expires_at: float
    user_status: str
    user_disabled: bool


@dataclass(frozen=True, slots=True)
class PendingLogin:
    """A sign-in sent to the identity provider and not yet back."""

    state_hash: str
    nonce: str
    code_verifier: str
    return_to: str
    expires_at: float


class SessionRepo:
    """Queries over `browser_sessions` and `oidc_logins`."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create(self, row: SessionRow) -> None:
        async with transaction(self._engine) as conn:
            await conn.execute(
                schema.browser_sessions.insert().values(
                    id_hash=row.id_hash,
                    user_id=row.user_id,
                    csrf_token=row.csrf_token,
                    created_at=row.created_at,
                    last_seen_at=row.last_seen_at,
                    expires_at=row.expires_at,
                )
            )

    async def get(self, id_hash: str) -> SessionRow | None:
        """The session with its person's status and disabled flag; None when it is gone."""
        s, u = schema.browser_sessions, schema.users
        query = (
            sa.select(s, u.c.status, u.c.disabled)
            .join(u, u.c.id == s.c.user_id)
            .where(s.c.id_hash == id_hash)
        )
        async with transaction(self._engine) as conn:
            row = (await conn.execute(query)).mappings().first()
        if row is None:
            return None
        return SessionRow(
            id_hash=row["id_hash"],
            user_id=row["user_id"],
            csrf_token=row["csrf_token"],
            created_at=row["created_at"],
            last_seen_at=row["last_seen_at"],
            expires_at=row["expires_at"],
            user_status=row["status"],
            user_disabled=bool(row["disabled"]),
        )

    async def touch(self, id_hash: str, last_seen_at: float) -> None:
        """Moves the session's last use forward (never back: another gateway may have
        seen it later)."""
        s = schema.browser_sessions
        async with transaction(self._engine) as conn:
            await conn.execute(
                s.update()
                .where(s.c.id_hash == id_hash, s.c.last_seen_at < last_seen_at)
                .values(last_seen_at=last_seen_at)
            )

    async def delete(self, id_hash: str) -> None:
        s = schema.browser_sessions
        async with transaction(self._engine) as conn:
            await conn.execute(s.delete().where(s.c.id_hash == id_hash))

    async def end_for_user(self, user_id: str) -> int:
        """Ends every session of one person; how many there were."""
        s = schema.browser_sessions
        async with transaction(self._engine) as conn:
            result = await conn.execute(s.delete().where(s.c.user_id == user_id))
        return int(result.rowcount or 0)

    async def purge(self, now: float) -> int:
        """Deletes sessions and sign-ins past their absolute end."""
        s, o = schema.browser_sessions, schema.oidc_logins
        async with transaction(self._engine) as conn:
            gone = await conn.execute(s.delete().where(s.c.expires_at <= now))
            await conn.execute(o.delete().where(o.c.expires_at <= now))
        return int(gone.rowcount or 0)

    async def begin_login(self, login: PendingLogin) -> None:
        async with transaction(self._engine) as conn:
            await conn.execute(
                schema.oidc_logins.insert().values(
                    state_hash=login.state_hash,
                    nonce=login.nonce,
                    code_verifier=login.code_verifier,
                    return_to=login.return_to,
                    expires_at=login.expires_at,
                )
            )

    async def take_login(self, state_hash: str, now: float) -> PendingLogin | None:
        """The sign-in of this `state`, deleted as it is read: only the first caller gets
        it, and one past its expiry is nobody's."""
        o = schema.oidc_logins
        async with transaction(self._engine) as conn:
            row = (await conn.execute(o.select().where(o.c.state_hash == state_hash))).mappings().first()
            if row is None:
                return None
            taken = await conn.execute(o.delete().where(o.c.state_hash == state_hash))
        if taken.rowcount != 1 or row["expires_at"] <= now:
            return None
        return PendingLogin(
            state_hash=row["state_hash"],
            nonce=row["nonce"],
            code_verifier=row["code_verifier"],
            return_to=row["return_to"],
            expires_at=row["expires_at"],
        )

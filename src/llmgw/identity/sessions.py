"""Browser sessions: who a request's cookie signs in, answered from memory in
microseconds, and from the store at least every `auth.cache_ttl`.

The cookie holds a random token; the store keeps its SHA-256 (`browser_sessions`), so
sign-out, a rejected or disabled person, or a session past its bounds is refused on
every gateway sharing the store once its cached answer is `cache_ttl` old. A session
ends at `auth.session.lifetime` after sign-in or `auth.session.idle` after its last
request, whichever comes first (`session_verdict`, pure, with the time passed in).
Recent use is kept in memory and written to the store when the entry is checked
again, so a busy session costs one store write per `cache_ttl`, not one per request.

Others ask `SessionManager.signed_in(headers)`: the signed-in person with their roles,
or None.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from llmgw.config.auth import Session
from llmgw.http.rsgi import Headers
from llmgw.store import Store
from llmgw.store.people import Role
from llmgw.store.sessions import SessionRow

COOKIE = "llmgw_session"
# Enough sessions for every person of a large organisation signed in on a few browsers;
# beyond it the least recently checked are forgotten (and read again from the store).
MAX_CACHED = 50_000
_TOKEN_BYTES = 32


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A person signed in through a browser session."""

    user_id: str
    name: str | None
    email: str | None
    status: str
    """active, or pending while a signup waits for approval."""
    roles: tuple[Role, ...]
    csrf_token: str
    """What every state-changing form of this session must carry."""
    session_hash: str

    @property
    def active(self) -> bool:
        return self.status == "active"


def session_verdict(
    created_at: float, last_seen_at: float, now: float, lifetime_s: float, idle_s: float
) -> str | None:
    """Why a session is over at `now` ("expired": past its lifetime; "idle": unused for
    longer than the idle bound), or None while it lasts."""
    if now >= created_at + lifetime_s:
        return "expired"
    if now >= last_seen_at + idle_s:
        return "idle"
    return None


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def cookie_token(headers: Headers) -> str | None:
    """The session token in the request's Cookie header, if any."""
    header = headers.get("cookie")
    if not header:
        return None
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and value:
            return value
    return None


class _Entry:
    """One cached session: the answer, when the store last confirmed it, and its use."""

    __slots__ = ("checked_at", "created_at", "last_seen_at", "signed", "stored_last_seen_at")

    def __init__(self, signed: SignedIn, row: SessionRow, last_seen_at: float, checked_at: float) -> None:
        self.signed = signed
        self.created_at = row.created_at
        self.stored_last_seen_at = row.last_seen_at
        self.last_seen_at = last_seen_at
        self.checked_at = checked_at


class SessionManager:
    """Starts, finds and ends browser sessions over the store."""

    def __init__(
        self,
        store: Store,
        rules: Session,
        cache_ttl_s: float,
        *,
        clock: Callable[[], float] = time.time,
        max_cached: int = MAX_CACHED,
    ) -> None:
        self._store = store
        self._lifetime_s = rules.lifetime.total_seconds()
        self._idle_s = rules.idle.total_seconds()
        self._cache_ttl_s = cache_ttl_s
        self._clock = clock
        self._max_cached = max_cached
        self._cache: dict[str, _Entry] = {}

    @property
    def lifetime_s(self) -> float:
        return self._lifetime_s

    async def start(self, user_id: str) -> tuple[str, SignedIn]:
        """A new session for `user_id`: the cookie's token (shown to nobody else) and who
        it signs in."""
        token = secrets.token_urlsafe(_TOKEN_BYTES)
        now = self._clock()
        row = SessionRow(
            id_hash=token_hash(token),
            user_id=user_id,
            csrf_token=secrets.token_urlsafe(_TOKEN_BYTES),
            created_at=now,
            last_seen_at=now,
            expires_at=now + self._lifetime_s,
            user_status="active",
            user_disabled=False,
        )
        await self._store.sessions.create(row)
        signed = await self._refresh(row.id_hash, None, now)
        if signed is None:
            raise LookupError(f"user {user_id!r} cannot hold a session (disabled or rejected)")
        return token, signed

    async def signed_in(self, headers: Headers) -> SignedIn | None:
        """Who the request's session cookie signs in, with their roles; None without a
        live session."""
        token = cookie_token(headers)
        return None if token is None else await self.lookup(token)

    async def lookup(self, token: str) -> SignedIn | None:
        """Who `token` signs in; None when it names no live session."""
        id_hash = token_hash(token)
        now = self._clock()
        entry = self._cache.get(id_hash)
        if (
            entry is not None
            and now - entry.checked_at < self._cache_ttl_s
            and (
                session_verdict(entry.created_at, entry.last_seen_at, now, self._lifetime_s, self._idle_s)
                is None
            )
        ):
            entry.last_seen_at = now
            return entry.signed
        return await self._refresh(id_hash, entry, now)

    async def _refresh(self, id_hash: str, entry: _Entry | None, now: float) -> SignedIn | None:
        sessions = self._store.sessions
        row = await sessions.get(id_hash)
        if row is None or row.user_disabled or row.user_status == "rejected":
            self._cache.pop(id_hash, None)
            if row is not None:
                await sessions.delete(id_hash)
            return None
        last_seen = max(row.last_seen_at, entry.last_seen_at if entry is not None else row.last_seen_at)
        if session_verdict(row.created_at, last_seen, now, self._lifetime_s, self._idle_s) is not None:
            self._cache.pop(id_hash, None)
            await sessions.delete(id_hash)
            return None
        if last_seen > row.last_seen_at:
            await sessions.touch(id_hash, last_seen)
        person = await self._store.people.get(row.user_id)
        if person is None:
            return None
        signed = SignedIn(
            user_id=person.id,
            name=person.name,
            email=person.email,
            status=person.status,
            roles=await self._store.people.roles(person.id),
            csrf_token=row.csrf_token,
            session_hash=id_hash,
        )
        self._remember(id_hash, _Entry(signed, row, now, now))
        return signed

    def _remember(self, id_hash: str, entry: _Entry) -> None:
        cache = self._cache
        cache.pop(id_hash, None)
        if len(cache) >= self._max_cached:
            # Dicts keep insertion order, and a refreshed entry is re-inserted: the first
            # is the one checked longest ago.
            del cache[next(iter(cache))]
        cache[id_hash] = entry

    async def end(self, signed: SignedIn) -> None:
        """Signs this session out, here at once and on other gateways within cache_ttl."""
        self._cache.pop(signed.session_hash, None)
        await self._store.sessions.delete(signed.session_hash)

    async def end_for_user(self, user_id: str) -> int:
        """Ends every session of one person (disabled, rejected); how many there were."""
        for id_hash in [h for h, e in self._cache.items() if e.signed.user_id == user_id]:
            del self._cache[id_hash]
        return await self._store.sessions.end_for_user(user_id)

    async def purge(self) -> int:
        """Deletes sessions and sign-ins under way past their absolute end."""
        return await self._store.sessions.purge(self._clock())

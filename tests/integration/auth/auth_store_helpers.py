"""Helpers for the auth tests: settings, a store, a populated tenancy tree, finished
requests as the gateway's usage sink hands them over, and a TCP relay in front of
PostgreSQL that can be cut, to make the store unreachable for real."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from llmgw.auth.keys import new_key
from llmgw.auth.principal import Principal
from llmgw.config import Settings
from llmgw.router.usage import NO_TAGS, Account, Tokens, UsageRecord
from llmgw.store import KeyRow, Scope, Store
from llmgw.store.engine import create_engine, is_postgres
from llmgw.store.schema import metadata


def settings(router: dict[str, Any] | None = None, **auth: Any) -> Settings:
    """Settings with auth on and `auth` set; durations may be given as seconds."""
    values: dict[str, Any] = {"enabled": True, "store": "unused", **auth}
    for name in ("cache_ttl", "negative_ttl", "flush_interval", "max_key_ttl", "usage_retention"):
        if isinstance(values.get(name), int | float):
            values[name] = timedelta(seconds=values[name])
    return Settings(auth=values, router=router or {})


async def empty_tables(location: str) -> None:
    """Deletes every row (tables exist once a store opened the database)."""
    engine = create_engine(location)
    try:
        async with engine.begin() as conn:
            existing = await conn.run_sync(lambda c: set(sa.inspect(c).get_table_names()))
            for table in reversed(metadata.sorted_tables):
                if table.name in existing:
                    await conn.execute(table.delete())
    finally:
        await engine.dispose()


_UPGRADED: set[str] = set()
"""Stores already brought to the newest schema in this run: opening them again skips
Alembic's check, which costs more than most tests."""


@contextlib.asynccontextmanager
async def opened(location: str) -> AsyncIterator[Store]:
    store = await Store.open(location, upgrade=location not in _UPGRADED)
    _UPGRADED.add(location)
    try:
        yield store
    finally:
        await store.close()


async def make_tree(store: Store, now: float = 1.0, **fields: dict[str, Any]) -> None:
    """org o > team t > project p, and person u; `fields` sets settings per level."""
    await store.tenancy.create(Scope("org", "o", created_at=now, updated_at=now, **fields.get("org", {})))
    await store.tenancy.create(
        Scope("team", "t", "o", created_at=now, updated_at=now, **fields.get("team", {}))
    )
    await store.tenancy.create(
        Scope("project", "p", "t", created_at=now, updated_at=now, **fields.get("project", {}))
    )
    await store.tenancy.create(Scope("user", "u", created_at=now, updated_at=now, **fields.get("user", {})))


async def make_key(store: Store, now: float, **fields: Any) -> str:
    """A key (a project key of p unless told otherwise); returns its plaintext."""
    made = new_key()
    if "user_id" not in fields:
        fields.setdefault("project_id", "p")
    await store.keys.create(KeyRow(made.id, made.hash, created_at=now, updated_at=now, **fields))
    return made.plaintext


def finished(
    principal: Principal | None,
    request_id: str = "r",
    *,
    model: str = "m1",
    status: int = 200,
    prompt: int = 0,
    completion: int = 0,
    counted: int = 0,
    tags: Mapping[str, str] = NO_TAGS,
    queued_s: float = 0.0,
    endpoint: str = "replica-a",
    stream: bool = False,
    started: float = 0.0,
    first_byte: float | None = None,
    ended: float = 0.5,
    usage: bool = True,
) -> tuple[UsageRecord, Tokens | None]:
    """One finished request as `AuthGate.record_many` takes it: the router's record (times
    on the monotonic clock: its UNIX finish is `ended` plus the hand-over's offset) and
    the tokens read from its answer (None where it carried no `usage`). Without a
    principal it has no account, as with auth off."""
    account = None if principal is None else Account(principal, counted, tags, queued_s, None)
    record = UsageRecord(
        request_id, model, endpoint, status, stream, None, started, first_byte, ended, account
    )
    return record, Tokens(prompt, completion) if usage else None


class Relay:
    """A TCP relay from a loopback port to PostgreSQL that can be cut (connections
    closed, new ones refused) or stalled (connections accepted, nothing forwarded)."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.stalled = asyncio.Event()
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await reader.read(65536):
                while self.stalled.is_set():
                    await asyncio.sleep(0.05)
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        self._writers += [writer, up_writer]
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in self._writers:
            writer.close()
        self._writers = []

    async def restore(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)


def through(location: str, relay: Relay) -> str:
    """The same PostgreSQL database, reached through `relay`."""
    assert is_postgres(location)
    url = sa.engine.make_url(location)
    return url.set(host="127.0.0.1", port=relay.port).render_as_string(hide_password=False)


class Clock:
    """A clock the test moves."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def started_gate(
    location: str, clock: Any = None, sync_interval: float = 0.05, **auth: Any
) -> AsyncIterator[Any]:
    """An AuthGate on its own store connection, started, closed at the end."""
    import time

    from llmgw.auth import AuthGate

    async with opened(location) as store:
        gate = AuthGate(settings(**auth), store, clock=clock or time.time, sync_interval=sync_interval)
        await gate.start()
        try:
            yield gate
        finally:
            await gate.close()

"""`Store`: the one handle on the database of keys, tenancy, limits and usage.

Built once at start from `auth.store` and passed to whatever needs it; opening it
brings the schema up to date in place. Its parts are small repositories over one
engine, so a caller names what it works on: `store.keys.revoke(...)`,
`store.usage.write_batch(...)`.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from llmgw.store import migrate
from llmgw.store.audit import AuditRepo
from llmgw.store.batch_files import BatchFilesRepo
from llmgw.store.counters import CounterRepo
from llmgw.store.engine import SqliteWorker, create_engine, describe, is_postgres, sqlite_file
from llmgw.store.grants import GrantRepo
from llmgw.store.guard import GuardRepo
from llmgw.store.keys import KeyRepo
from llmgw.store.node_certs import NodeCertRepo
from llmgw.store.notify import NotifyRepo
from llmgw.store.people import PeopleRepo
from llmgw.store.provisioning import ProvisioningRepo
from llmgw.store.responses import ResponsesRepo
from llmgw.store.sessions import SessionRepo
from llmgw.store.tenancy import TenancyRepo
from llmgw.store.usage import UsageRepo


class Store:
    """The database behind one interface, SQLite or PostgreSQL."""

    def __init__(self, engine: AsyncEngine, location: str) -> None:
        self.engine = engine
        self.location = location
        # The frequent writes' own thread and connection on a SQLite file; an in-memory
        # database cannot be opened twice, so it stays on the engine.
        path = sqlite_file(engine.url)
        self._sqlite = SqliteWorker(path) if path is not None else None
        self.tenancy = TenancyRepo(engine)
        self.keys = KeyRepo(engine)
        self.guard = GuardRepo(engine)
        self.people = PeopleRepo(engine)
        self.sessions = SessionRepo(engine)
        self.grants = GrantRepo(engine)
        self.counters = CounterRepo(engine, self._sqlite)
        self.usage = UsageRepo(engine, self._sqlite)
        self.provisioning = ProvisioningRepo(engine, self._sqlite)
        self.notify = NotifyRepo(engine)
        self.node_certs = NodeCertRepo(engine)
        self.responses = ResponsesRepo(engine)
        self.batch = BatchFilesRepo(engine)
        self.audit = AuditRepo(engine)

    @classmethod
    async def open(cls, location: str, *, upgrade: bool = True) -> Store:
        """Opens `auth.store` (a path or a postgresql:// URL) and, unless told not to,
        upgrades its schema to the newest version; `StoreUnavailable` if it cannot."""
        engine = create_engine(location)
        store = cls(engine, location)
        if upgrade:
            try:
                await migrate.upgrade(engine)
            except BaseException:
                await engine.dispose()
                raise
        return store

    @property
    def shared(self) -> bool:
        """Whether other gateways may use this store too (PostgreSQL)."""
        return is_postgres(self.location)

    def __repr__(self) -> str:
        return f"Store({describe(self.location)!r})"

    async def close(self) -> None:
        try:
            if self._sqlite is not None:
                await self._sqlite.close()
        finally:
            await self.engine.dispose()

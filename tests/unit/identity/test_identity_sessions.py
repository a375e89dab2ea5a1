"""Browser sessions over a real SQLite store with the clock injected: the idle and
absolute bounds, sign-out, and a session ended elsewhere (another gateway, a disabled
or rejected person) refused once the cached answer is cache_ttl old, not before."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

from llmgw.config.auth import Session
from llmgw.identity.sessions import COOKIE, SessionManager, cookie_token, session_verdict
from llmgw.store import Store
from llmgw.store.people import Person

T = TypeVar("T")
RULES = Session(lifetime=timedelta(hours=12), idle=timedelta(hours=2))
CACHE_TTL_S = 30.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class Headers:
    def __init__(self, cookie: str | None) -> None:
        self._cookie = cookie

    def get(self, name: str, /) -> str | None:
        return self._cookie if name == "cookie" else None


def _run(tmp_path: Path, scenario: Callable[[Store, SessionManager, Clock], Awaitable[T]]) -> T:
    async def main() -> T:
        store = await Store.open(str(tmp_path / "llmgw.db"))
        clock = Clock()
        try:
            await store.people.create(Person(id="ada", email="ada@example.com", name="Ada"), clock())
            return await scenario(store, SessionManager(store, RULES, CACHE_TTL_S, clock=clock), clock)
        finally:
            await store.close()

    return asyncio.run(main())


def test_the_verdict_names_the_bound_that_ended_a_session() -> None:
    hour = 3600.0
    assert session_verdict(0.0, 0.0, 1.9 * hour, 12 * hour, 2 * hour) is None
    assert session_verdict(0.0, 0.0, 2 * hour, 12 * hour, 2 * hour) == "idle"
    assert session_verdict(0.0, 11.9 * hour, 12 * hour, 12 * hour, 2 * hour) == "expired"


def test_the_cookie_is_found_among_others() -> None:
    assert cookie_token(Headers(f"theme=dark; {COOKIE}=abc; other=1")) == "abc"
    assert cookie_token(Headers("theme=dark")) is None
    assert cookie_token(Headers(None)) is None


def test_a_used_session_lasts_until_its_lifetime_however_busy(tmp_path: Path) -> None:
    async def scenario(store: Store, sessions: SessionManager, clock: Clock) -> list[bool]:
        token, signed = await sessions.start("ada")
        assert signed.user_id == "ada"
        assert signed.name == "Ada"
        alive = []
        for _ in range(11):  # a request every hour, for 11 hours: never idle
            clock.now += 3600
            alive.append(await sessions.lookup(token) is not None)
        clock.now += 3600  # 12h after sign-in
        alive.append(await sessions.lookup(token) is not None)
        return alive

    assert _run(tmp_path, scenario) == [True] * 11 + [False]


def test_an_unused_session_ends_after_the_idle_bound(tmp_path: Path) -> None:
    async def scenario(store: Store, sessions: SessionManager, clock: Clock) -> tuple[bool, bool]:
        token, _ = await sessions.start("ada")
        clock.now += 2 * 3600 - 1
        before = await sessions.lookup(token) is not None
        clock.now += 2 * 3600
        return before, await sessions.lookup(token) is not None

    assert _run(tmp_path, scenario) == (True, False)


def test_use_seen_by_one_gateway_keeps_the_session_alive_on_another(tmp_path: Path) -> None:
    async def scenario(store: Store, sessions: SessionManager, clock: Clock) -> bool:
        token, _ = await sessions.start("ada")
        other = SessionManager(store, RULES, CACHE_TTL_S, clock=clock)
        for _ in range(5):  # used on the first gateway every 40 minutes for 3h20
            clock.now += 2400
            assert await sessions.lookup(token) is not None
        # The second gateway has not seen it for 3h20, yet the store says it was used.
        return await other.lookup(token) is not None

    assert _run(tmp_path, scenario) is True


def test_a_session_ended_elsewhere_is_refused_within_cache_ttl(tmp_path: Path) -> None:
    async def scenario(store: Store, sessions: SessionManager, clock: Clock) -> tuple[bool, bool]:
        token, _ = await sessions.start("ada")
        await store.sessions.end_for_user("ada")  # what another gateway's sign-out does
        clock.now += CACHE_TTL_S / 2
        cached = await sessions.lookup(token) is not None
        clock.now += CACHE_TTL_S / 2
        return cached, await sessions.lookup(token) is not None

    assert _run(tmp_path, scenario) == (True, False)


def test_a_disabled_or_rejected_person_loses_their_session(tmp_path: Path) -> None:
    async def scenario(store: Store, sessions: SessionManager, clock: Clock) -> tuple[bool, bool]:
        await store.people.create(Person(id="bo", email="bo@example.com", status="pending"), clock())
        ada, _ = await sessions.start("ada")
        bo, pending = await sessions.start("bo")
        assert not pending.active
        await store.tenancy.update("user", "ada", {"disabled": True}, clock())
        await store.people.set_status("bo", "rejected", clock())
        clock.now += CACHE_TTL_S
        return await sessions.lookup(ada) is None, await sessions.lookup(bo) is None

    assert _run(tmp_path, scenario) == (True, True)


def test_sign_out_ends_the_session_at_once_and_unknown_tokens_find_nothing(tmp_path: Path) -> None:
    async def scenario(store: Store, sessions: SessionManager, clock: Clock) -> tuple[bool, bool]:
        token, signed = await sessions.start("ada")
        await sessions.end(signed)
        return await sessions.lookup(token) is None, await sessions.lookup("forged") is None

    assert _run(tmp_path, scenario) == (True, True)


def test_the_cache_is_bounded(tmp_path: Path) -> None:
    async def scenario(store: Store, sessions: SessionManager, clock: Clock) -> bool:
        small = SessionManager(store, RULES, CACHE_TTL_S, clock=clock, max_cached=3)
        tokens = [(await small.start("ada"))[0] for _ in range(5)]
        assert len(small._cache) == 3
        # The forgotten ones are read again from the store: still signed in.
        return all([await small.lookup(t) is not None for t in tokens])

    assert _run(tmp_path, scenario) is True

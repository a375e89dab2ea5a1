"""Who a sign-in is, over a real SQLite store: found by subject, matched by e-mail to a
person made before (not when the provider has not verified the address, nor when the
address is someone else's), made active or pending, refused when disabled or
rejected; and the groups claim kept in step with the sign-in's own memberships."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from llmgw.errors import SignInRefused
from llmgw.identity.admit import admit
from llmgw.identity.claims import Profile
from llmgw.store import Scope, Store, schema
from llmgw.store.people import Person

T = TypeVar("T")
NOW = 1_800_000_000.0


def _profile(sub: str = "sub-1", email: str | None = "ada@example.com", **extra: object) -> Profile:
    fields: dict[str, object] = {
        "subject": sub,
        "username": "ada",
        "email": email,
        "email_verified": None,
        "name": "Ada",
        "groups": (),
    }
    fields.update(extra)
    return Profile(**fields)  # type: ignore[arg-type]


def _run(tmp_path: Path, scenario: Callable[[Store], Awaitable[T]]) -> T:
    async def main() -> T:
        store = await Store.open(str(tmp_path / "llmgw.db"))
        try:
            return await scenario(store)
        finally:
            await store.close()

    return asyncio.run(main())


def test_a_newcomer_is_active_or_pending_with_signup_open(tmp_path: Path) -> None:
    async def scenario(store: Store) -> tuple[str, str, str]:
        first = await admit(store, _profile(), signup_open=False, now=NOW)
        again = await admit(store, _profile(email="changed@example.com"), signup_open=False, now=NOW)
        waiting = await admit(
            store, _profile("sub-2", "bo@example.com", username="bo"), signup_open=True, now=NOW
        )
        assert again.id == first.id  # the subject decides, not the address
        return first.status, first.id, waiting.status

    assert _run(tmp_path, scenario) == ("active", "ada", "pending")


def test_a_person_made_before_is_matched_by_e_mail_once(tmp_path: Path) -> None:
    async def scenario(store: Store) -> tuple[str, str | None, str]:
        await store.people.create(Person(id="ada.l", email="Ada@Example.com", status="pending"), NOW)
        found = await admit(store, _profile(), signup_open=True, now=NOW)
        linked = await store.people.get("ada.l")
        assert linked is not None
        return found.id, linked.subject, found.status

    assert _run(tmp_path, scenario) == ("ada.l", "sub-1", "pending")


def test_an_unverified_address_matches_nobody(tmp_path: Path) -> None:
    async def scenario(store: Store) -> tuple[str, str | None]:
        await store.people.create(Person(id="ada.l", email="ada@example.com"), NOW)
        found = await admit(store, _profile(email_verified=False), signup_open=False, now=NOW)
        kept = await store.people.get("ada.l")
        assert kept is not None
        return found.id, kept.subject

    assert _run(tmp_path, scenario) == ("ada", None)


def test_an_address_another_subject_holds_is_refused_and_nothing_made(tmp_path: Path) -> None:
    async def scenario(store: Store) -> tuple[str | None, int]:
        await admit(store, _profile("sub-1"), signup_open=False, now=NOW)
        with pytest.raises(SignInRefused) as refused:
            await admit(store, _profile("sub-other"), signup_open=False, now=NOW)
        people = await store.tenancy.find("user")
        return refused.value.code, len(people)

    assert _run(tmp_path, scenario) == ("email_taken", 1)


def test_disabled_and_rejected_people_are_refused(tmp_path: Path) -> None:
    async def scenario(store: Store) -> list[str | None]:
        await store.people.create(Person(id="d", email="d@example.com", subject="sub-d", disabled=True), NOW)
        await store.people.create(
            Person(id="r", email="r@example.com", subject="sub-r", status="rejected"), NOW
        )
        codes = []
        for sub in ("sub-d", "sub-r"):
            with pytest.raises(SignInRefused) as refused:
                await admit(store, _profile(sub, None), signup_open=False, now=NOW)
            codes.append(refused.value.code)
        return codes

    assert _run(tmp_path, scenario) == ["person_disabled", "signup_rejected"]


def test_groups_join_and_leave_only_the_sign_ins_own_memberships(tmp_path: Path) -> None:
    async def scenario(store: Store) -> list[tuple[str, str]]:
        await store.tenancy.create(Scope(kind="org", id="acme"))
        for team, group in (("research", "g-research"), ("ops", "g-ops"), ("manual", "g-manual")):
            await store.tenancy.create(Scope(kind="team", id=team, parent="acme", idp_group=group))
        await admit(store, _profile(groups=("g-research", "g-ops", "unmapped")), signup_open=False, now=NOW)
        # An operator adds the person to a team by hand: sign-in never removes that.
        async with store.engine.begin() as conn:
            await conn.execute(
                schema.team_memberships.insert().values(
                    user_id="ada", team_id="manual", role="admin", source="manual", created_at=NOW
                )
            )
        await admit(store, _profile(groups=("g-ops",)), signup_open=False, now=NOW)
        return [(r.id, r.source) for r in await store.people.roles("ada")]

    assert _run(tmp_path, scenario) == [("manual", "manual"), ("ops", "oidc")]

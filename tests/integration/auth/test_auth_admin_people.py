"""The admin API answering signed-in people, in process over a real store (SQLite and
PostgreSQL): each route's verdict for a member, a team admin and an org admin, lists cut
down to what each may see, grants that change the role in place, and the routes that
are the operator's alone. The socket, the session and CSRF are tested through a gateway
process in tests/integration/identity/test_identity_roles_api.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest

from llmgw.admin.api import AdminApi
from llmgw.config import Settings
from llmgw.errors import ApiError
from llmgw.identity.roles import OPERATOR, Actor
from llmgw.store import Store
from llmgw.store.people import Person

Call = Callable[..., Awaitable[tuple[int, Any]]]


def _run(location: str, scenario: Callable[[Call, Store], Awaitable[None]]) -> None:
    async def main() -> None:
        store = await Store.open(location)
        try:
            api = AdminApi(Settings(auth={"enabled": True, "store": location}), store, "token")

            async def call(
                actor: Actor, method: str, path: str, body: dict[str, Any] | None = None
            ) -> tuple[int, Any]:
                path, _, query_text = path.partition("?")
                query = dict(pair.split("=", 1) for pair in query_text.split("&") if pair)
                raw = orjson.dumps(body) if body is not None else b""
                try:
                    return await api.handle(method, "/api/" + path, query, raw, actor=actor)
                except ApiError as error:
                    return error.status, {"code": error.code, "message": error.message}

            for kind, fields in (
                ("orgs", {"id": "acme"}),
                ("orgs", {"id": "globex"}),
                ("teams", {"id": "research", "org": "acme"}),
                ("teams", {"id": "ops", "org": "acme"}),
                ("teams", {"id": "sales", "org": "globex"}),
                ("projects", {"id": "chat", "team": "research"}),
                ("projects", {"id": "infra", "team": "ops"}),
                ("projects", {"id": "crm", "team": "sales"}),
            ):
                assert (await call(OPERATOR, "POST", kind, fields))[0] == 201
            for person in ("mia", "tina", "olga", "zed"):
                await store.people.create(Person(id=person), time.time())
            for user, path, role in (
                ("mia", "project/chat", "member"),
                ("tina", "team/research", "admin"),
                ("olga", "org/acme", "admin"),
            ):
                assert (await call(OPERATOR, "PUT", f"users/{user}/roles/{path}", {"role": role}))[0] == 200
            await scenario(call, store)
        finally:
            await store.close()

    asyncio.run(main())


async def _actor(store: Store, user: str) -> Actor:
    return Actor(user, await store.people.roles(user))


def test_each_route_answers_each_role(store_location: str) -> None:
    async def scenario(call: Call, store: Store) -> None:
        mia, tina, olga = [await _actor(store, u) for u in ("mia", "tina", "olga")]
        cases: list[tuple[Actor, str, str, dict[str, Any] | None, int]] = [
            # people: themselves only
            (mia, "GET", "users/mia", None, 200),
            (mia, "GET", "users/tina", None, 404),
            (mia, "PATCH", "users/mia", {"rpm": 10**6}, 403),
            (mia, "POST", "users/mia/approve", None, 403),
            (olga, "POST", "users", {"id": "new"}, 403),
            # the tree
            (mia, "GET", "projects/chat", None, 200),
            (mia, "GET", "projects/infra", None, 404),
            (mia, "GET", "teams/research", None, 404),
            (tina, "GET", "teams/research", None, 200),
            (tina, "DELETE", "teams/research", None, 403),
            (olga, "GET", "orgs/globex", None, 404),
            (olga, "POST", "orgs", {"id": "mine"}, 403),
            # memberships
            (mia, "POST", "memberships", {"user": "zed", "project": "chat"}, 403),
            (tina, "POST", "memberships", {"user": "zed", "project": "chat"}, 201),
            (mia, "GET", "memberships?project=infra", None, 404),
            (tina, "DELETE", "memberships/zed/chat", None, 200),
            (olga, "DELETE", "memberships/mia/crm", None, 404),
            # roles: the scope's manager grants them
            (tina, "PUT", "users/zed/roles/project/chat", {"role": "admin"}, 200),
            (tina, "PUT", "users/zed/roles/team/research", {"role": "member"}, 403),
            (olga, "PUT", "users/zed/roles/team/ops", {"role": "member"}, 200),
            (olga, "DELETE", "users/zed/roles/team/ops", None, 200),
            (olga, "PUT", "users/zed/roles/galaxy/x", {"role": "member"}, 404),
            (OPERATOR, "PUT", "users/zed/roles/galaxy/x", {"role": "member"}, 404),
            # projects made and deleted by their team's admin
            (tina, "POST", "projects", {"id": "lab", "team": "research"}, 201),
            (tina, "DELETE", "projects/lab", None, 200),
            (tina, "POST", "projects", {"id": "lab", "team": "ops"}, 404),
            # the operator's alone
            (olga, "GET", "usage", None, 403),
            (olga, "PUT", "ttl/org/acme", {"max_key_ttl": "24h"}, 403),
            (olga, "GET", "settings/inert", None, 403),
            (olga, "GET", "control/nodes", None, 403),
        ]
        for actor, method, path, body, status in cases:
            got, answer = await call(actor, method, path, body)
            assert got == status, (actor.user_id, method, path, answer)

    _run(store_location, scenario)


def test_lists_answer_only_what_each_may_see(store_location: str) -> None:
    async def scenario(call: Call, store: Store) -> None:
        for project in ("chat", "infra", "crm"):
            assert (await call(OPERATOR, "POST", "keys", {"project": project}))[0] == 201
        assert (await call(OPERATOR, "POST", "keys", {"user": "zed"}))[0] == 201
        mia, tina, olga = [await _actor(store, u) for u in ("mia", "tina", "olga")]

        async def ids(actor: Actor, path: str, field: str = "id") -> list[str]:
            status, answer = await call(actor, "GET", path)
            assert status == 200, answer
            return sorted(str(row[field]) for row in answer["data"])

        assert await ids(mia, "projects") == ["chat"]
        assert await ids(tina, "projects") == ["chat"]
        assert await ids(olga, "projects") == ["chat", "infra"]
        assert await ids(olga, "teams") == ["ops", "research"]
        assert await ids(mia, "users") == ["mia"]
        assert await ids(mia, "keys", "project") == []
        assert await ids(tina, "keys", "project") == ["chat"]
        assert await ids(olga, "keys", "project") == ["chat", "infra"]
        assert await ids(mia, "memberships", "project") == ["chat"]
        assert len(await ids(OPERATOR, "keys")) == 4

    _run(store_location, scenario)


def test_a_grant_again_changes_the_role_in_place(store_location: str) -> None:
    async def scenario(call: Call, store: Store) -> None:
        assert (await call(OPERATOR, "PUT", "users/mia/roles/project/chat", {"role": "admin"}))[0] == 200
        mia = await _actor(store, "mia")
        assert [(r.kind, r.id, r.role) for r in mia.roles] == [("project", "chat", "admin")]
        assert (await call(mia, "POST", "keys", {"project": "chat"}))[0] == 201
        status, answer = await call(OPERATOR, "PUT", "users/mia/roles/project/chat", {"role": "owner"})
        assert status == 400
        assert "role" in answer["message"]

    _run(store_location, scenario)


@pytest.mark.parametrize("field", ["band", "rpm", "tpm"])
def test_a_person_may_not_set_a_keys_limits_or_band(field: str, tmp_path: Any) -> None:
    async def scenario(call: Call, store: Store) -> None:
        mia = await _actor(store, "mia")
        status, answer = await call(
            mia, "POST", "keys", {"user": "mia", field: 1 if field != "band" else "x"}
        )
        assert status == 403
        assert answer["code"] == "operator_only"
        assert field in answer["message"]

    _run(str(tmp_path / "llmgw.db"), scenario)

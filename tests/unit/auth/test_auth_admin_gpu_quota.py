"""A GPU quota written on an org, team or project through the admin API's handlers, over a
real SQLite store: set on create and by PATCH, cleared by null, shown in the JSON, never
negative, and refused on a person (who owns no models)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from llmgw.admin import models as m
from llmgw.admin.handlers import Handlers
from llmgw.config import Settings
from llmgw.store import Store


def test_the_quota_is_a_non_negative_count_of_devices() -> None:
    assert m.TeamBody.model_validate({"id": "t", "org": "o", "gpu_quota": 8}).gpu_quota == 8
    with pytest.raises(ValidationError, match="gpu_quota"):
        m.TenancyFields.model_validate({"gpu_quota": -1})
    for person in (m.UserBody, m.UserPatch):
        with pytest.raises(ValidationError, match="gpu_quota"):
            person.model_validate({"id": "u", "gpu_quota": 1} if person is m.UserBody else {"gpu_quota": 1})
    patch = m.TenancyFields.model_validate({"gpu_quota": None})
    assert m.store_changes(patch, given=set(patch.model_fields_set)) == {"gpu_quota": None}


def test_set_on_create_changed_by_patch_and_cleared(tmp_path: Path) -> None:
    async def scenario() -> list[Any]:
        location = str(tmp_path / "s.db")
        store = await Store.open(location)
        handlers = Handlers(Settings(auth={"enabled": True, "store": location}), store, None, lambda: 100.0)

        async def call(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
            return await handlers.dispatch(method, path.split("/"), {}, body or {})

        try:
            return [
                await call("POST", "orgs", {"id": "o", "gpu_quota": 16}),
                await call("POST", "teams", {"id": "t", "org": "o"}),
                await call("PATCH", "teams/t", {"gpu_quota": 8}),
                await call("GET", "teams"),
                await call("PATCH", "teams/t", {"gpu_quota": None}),
                await call("POST", "users", {"id": "u"}),
                (await store.tenancy.gpu_quotas()),
            ]
        finally:
            await store.close()

    made_org, made_team, patched, listed, cleared, user, stored = asyncio.run(scenario())
    assert made_org[0] == 201
    assert made_org[1]["gpu_quota"] == 16
    assert made_team[1]["gpu_quota"] is None
    assert patched[1]["gpu_quota"] == 8
    assert [row["gpu_quota"] for row in listed[1]["data"]] == [8]
    assert cleared[1]["gpu_quota"] is None
    assert "gpu_quota" not in user[1]
    assert stored == {"org:o": 16}

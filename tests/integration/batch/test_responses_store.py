"""Stored responses and conversations in a real store: scoped to their owner, listed in
order with pagination, and swept once expired (the clock passed in)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from llmgw.store import Store
from llmgw.store.responses import StoredConversation, StoredResponse

T = 1_800_000_000.0


def _response(ident: str, owner: str, expires_at: float) -> StoredResponse:
    return StoredResponse(
        ident, owner, None, None, [{"id": "msg_in"}], {"id": ident, "output": []}, T, expires_at
    )


def test_objects_are_scoped_listed_and_swept(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await Store.open(str(tmp_path / "llmgw.db"))
        repo = store.responses
        try:
            await repo.save_response(_response("resp_old", "project:a", T + 10))
            await repo.save_response(_response("resp_new", "project:a", T + 1000))
            assert await repo.get_response("resp_old", "project:b", T) is None
            found = await repo.get_response("resp_old", "project:a", T)
            assert found is not None
            assert found.input_items == [{"id": "msg_in"}]
            assert await repo.get_response("resp_old", "project:a", T + 20) is None  # expired, not yet swept
            items = [(f"msg_{n}", {"id": f"msg_{n}"}) for n in range(5)]
            await repo.create_conversation(StoredConversation("conv_1", "threads", {}, T, T + 10), items)
            page, more = await repo.items("conv_1", limit=2)
            assert ([i["id"] for i in page], more) == (["msg_0", "msg_1"], True)
            page, more = await repo.items("conv_1", after="msg_1", limit=10, descending=True)
            assert ([i["id"] for i in page], more) == (["msg_0"], False)
            assert await repo.sweep(T + 20) == 2  # resp_old and conv_1
            assert await repo.get_response("resp_new", "project:a", T + 20) is not None
            assert await repo.get_conversation("conv_1", "threads") is None
            assert await repo.items("conv_1") == ([], False)
            assert not await repo.delete_response("resp_new", "project:b")
            assert await repo.delete_response("resp_new", "project:a")
        finally:
            await store.close()

    asyncio.run(scenario())

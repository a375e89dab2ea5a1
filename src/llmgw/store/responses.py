"""The Responses API's stored responses and conversations (llmgw.batch), every query
scoped to an owner: `project:ID`, `user:ID`, or `threads` (the pool of a gateway without
auth). Another owner's id is not found, the same as one that never existed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from llmgw.store import schema
from llmgw.store.engine import transaction

_RESPONSES = schema.stored_responses
_CONVERSATIONS = schema.conversations
_ITEMS = schema.conversation_items

Item = dict[str, Any]


@dataclass(frozen=True)
class StoredResponse:
    id: str
    owner: str
    previous_id: str | None
    conversation_id: str | None
    input_items: list[Item]
    body: dict[str, Any]
    created_at: float
    expires_at: float


@dataclass(frozen=True)
class StoredConversation:
    id: str
    owner: str
    metadata: dict[str, Any]
    created_at: float
    expires_at: float


def _response(row: sa.Row[Any]) -> StoredResponse:
    return StoredResponse(
        row.id,
        row.owner,
        row.previous_id,
        row.conversation_id,
        orjson.loads(row.input_items),
        orjson.loads(row.body),
        row.created_at,
        row.expires_at,
    )


class ResponsesRepo:
    """Queries over stored responses, conversations and their items."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def get_response(self, response_id: str, owner: str, now: float = 0.0) -> StoredResponse | None:
        """The response, if `owner` holds it and it has not expired by `now`."""
        query = sa.select(_RESPONSES).where(
            (_RESPONSES.c.id == response_id) & (_RESPONSES.c.owner == owner) & (_RESPONSES.c.expires_at > now)
        )
        async with transaction(self._engine) as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _response(row)

    async def save_response(
        self, stored: StoredResponse, conversation_items: Sequence[tuple[str, Item]] = ()
    ) -> None:
        """The response and, when it is part of a conversation, its input and output
        appended to the conversation's items: all in one transaction, or nothing."""
        async with transaction(self._engine) as conn:
            await conn.execute(
                _RESPONSES.insert().values(
                    id=stored.id,
                    owner=stored.owner,
                    previous_id=stored.previous_id,
                    conversation_id=stored.conversation_id,
                    input_items=orjson.dumps(stored.input_items).decode(),
                    body=orjson.dumps(stored.body).decode(),
                    created_at=stored.created_at,
                    expires_at=stored.expires_at,
                )
            )
            if stored.conversation_id is not None and conversation_items:
                await _append(
                    conn, stored.conversation_id, conversation_items, stored.created_at, stored.expires_at
                )

    async def delete_response(self, response_id: str, owner: str) -> bool:
        where = (_RESPONSES.c.id == response_id) & (_RESPONSES.c.owner == owner)
        async with transaction(self._engine) as conn:
            result = await conn.execute(_RESPONSES.delete().where(where))
        return bool(result.rowcount)

    async def create_conversation(
        self, conversation: StoredConversation, items: Sequence[tuple[str, Item]]
    ) -> None:
        async with transaction(self._engine) as conn:
            await conn.execute(
                _CONVERSATIONS.insert().values(
                    id=conversation.id,
                    owner=conversation.owner,
                    metadata=orjson.dumps(conversation.metadata).decode(),
                    created_at=conversation.created_at,
                    expires_at=conversation.expires_at,
                )
            )
            if items:
                await _append(conn, conversation.id, items, conversation.created_at, conversation.expires_at)

    async def get_conversation(
        self, conversation_id: str, owner: str, now: float = 0.0
    ) -> StoredConversation | None:
        query = sa.select(_CONVERSATIONS).where(
            (_CONVERSATIONS.c.id == conversation_id)
            & (_CONVERSATIONS.c.owner == owner)
            & (_CONVERSATIONS.c.expires_at > now)
        )
        async with transaction(self._engine) as conn:
            row = (await conn.execute(query)).first()
        if row is None:
            return None
        return StoredConversation(
            row.id, row.owner, orjson.loads(row.metadata), row.created_at, row.expires_at
        )

    async def delete_conversation(self, conversation_id: str, owner: str) -> bool:
        where = (_CONVERSATIONS.c.id == conversation_id) & (_CONVERSATIONS.c.owner == owner)
        async with transaction(self._engine) as conn:
            result = await conn.execute(_CONVERSATIONS.delete().where(where))
            if result.rowcount:
                await conn.execute(_ITEMS.delete().where(_ITEMS.c.conversation_id == conversation_id))
        return bool(result.rowcount)

    async def add_items(
        self, conversation_id: str, items: Sequence[tuple[str, Item]], now: float, expires_at: float
    ) -> None:
        async with transaction(self._engine) as conn:
            await _append(conn, conversation_id, items, now, expires_at)

    async def items(
        self,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        descending: bool = False,
    ) -> tuple[list[Item], bool]:
        """The conversation's items in the order asked, from after the item `after`; and
        whether more follow `limit`."""
        column = _ITEMS.c.seq
        where = _ITEMS.c.conversation_id == conversation_id
        async with transaction(self._engine) as conn:
            if after is not None:
                mark = (
                    await conn.execute(sa.select(column).where(where & (_ITEMS.c.item_id == after)))
                ).scalar()
                if mark is not None:
                    where = where & (column < mark if descending else column > mark)
            query = sa.select(_ITEMS.c.item).where(where).order_by(column.desc() if descending else column)
            if limit is not None:
                query = query.limit(limit + 1)
            rows = (await conn.execute(query)).all()
        found = [orjson.loads(row.item) for row in rows]
        if limit is not None and len(found) > limit:
            return found[:limit], True
        return found, False

    async def sweep(self, now: float) -> int:
        """Deletes what expired by `now`; how many responses and conversations went."""
        async with transaction(self._engine) as conn:
            gone = await conn.execute(_RESPONSES.delete().where(_RESPONSES.c.expires_at <= now))
            expired = sa.select(_CONVERSATIONS.c.id).where(_CONVERSATIONS.c.expires_at <= now)
            await conn.execute(_ITEMS.delete().where(_ITEMS.c.conversation_id.in_(expired)))
            ended = await conn.execute(_CONVERSATIONS.delete().where(_CONVERSATIONS.c.expires_at <= now))
        return int(gone.rowcount or 0) + int(ended.rowcount or 0)


async def _append(
    conn: AsyncConnection,
    conversation_id: str,
    items: Sequence[tuple[str, Item]],
    now: float,
    expires_at: float,
) -> None:
    """Appends items and keeps the conversation alive until `expires_at` (its retention
    counts from the last time it was used)."""
    await conn.execute(
        _ITEMS.insert(),
        [
            {
                "conversation_id": conversation_id,
                "item_id": ident,
                "item": orjson.dumps(item).decode(),
                "created_at": now,
            }
            for ident, item in items
        ],
    )
    await conn.execute(
        _CONVERSATIONS.update().where(_CONVERSATIONS.c.id == conversation_id).values(expires_at=expires_at)
    )

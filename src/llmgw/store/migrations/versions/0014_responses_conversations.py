"""The Responses API's stored responses and conversations (llmgw.batch), each row owned
by a project, a person or the `threads` pool, and swept after its retention.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_SECONDS = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "stored_responses",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("previous_id", sa.Text, nullable=True),
        sa.Column("conversation_id", sa.Text, nullable=True),
        sa.Column("input_items", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("created_at", _SECONDS, nullable=False),
        sa.Column("expires_at", _SECONDS, nullable=False),
    )
    op.create_index("ix_stored_responses_expires_at", "stored_responses", ["expires_at"])
    op.create_table(
        "conversations",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("metadata", sa.Text, nullable=False),
        sa.Column("created_at", _SECONDS, nullable=False),
        sa.Column("expires_at", _SECONDS, nullable=False),
    )
    op.create_index("ix_conversations_expires_at", "conversations", ["expires_at"])
    op.create_table(
        "conversation_items",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("conversation_id", sa.Text, nullable=False),
        sa.Column("item_id", sa.Text, nullable=False),
        sa.Column("item", sa.Text, nullable=False),
        sa.Column("created_at", _SECONDS, nullable=False),
    )
    op.create_index("ix_conversation_items_conversation_id", "conversation_items", ["conversation_id"])


def downgrade() -> None:
    op.drop_index("ix_conversation_items_conversation_id", "conversation_items")
    op.drop_table("conversation_items")
    op.drop_index("ix_conversations_expires_at", "conversations")
    op.drop_table("conversations")
    op.drop_index("ix_stored_responses_expires_at", "stored_responses")
    op.drop_table("stored_responses")

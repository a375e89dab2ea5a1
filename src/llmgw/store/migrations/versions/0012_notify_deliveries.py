"""Webhook deliveries: each event for each webhook, kept until delivered or given up,
so a restart or a receiver that is down loses nothing (llmgw.notify.outbox).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_SECONDS = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "notify_deliveries",
        sa.Column("event_id", sa.Text, primary_key=True),
        sa.Column("webhook", sa.Text, primary_key=True),
        sa.Column("event_type", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("created_at", _SECONDS, nullable=False),
        sa.Column("next_at", _SECONDS, nullable=False),
        sa.Column("last_error", sa.Text, nullable=False),
        sa.Column("last_status", sa.Integer, nullable=True),
        sa.Column("delivered_at", _SECONDS, nullable=True),
    )
    op.create_index("ix_notify_deliveries_due", "notify_deliveries", ["state", "next_at"])
    op.create_index("ix_notify_deliveries_created", "notify_deliveries", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_notify_deliveries_created", "notify_deliveries")
    op.drop_index("ix_notify_deliveries_due", "notify_deliveries")
    op.drop_table("notify_deliveries")

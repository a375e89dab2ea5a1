"""Guard policies attached to organisations, teams, projects and people.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "guard_attachments",
        sa.Column("scope_kind", sa.Text, primary_key=True),
        sa.Column("scope_id", sa.Text, primary_key=True),
        sa.Column("policy", sa.Text, primary_key=True),
        sa.Column("created_at", sa.Float(precision=53), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("guard_attachments")

"""Each server's demand for the leader to plan with, and the cluster's shared secrets.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_SECONDS = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "control_demand",
        sa.Column("model", sa.Text, primary_key=True),
        sa.Column("holder", sa.Text, primary_key=True),
        sa.Column("last_asked", _SECONDS, nullable=True),
        sa.Column("waiting_since", _SECONDS, nullable=True),
        sa.Column("updated_at", _SECONDS, nullable=False),
    )
    op.create_table(
        "cluster_secrets",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("secret", sa.Text, nullable=False),
        sa.Column("created_at", _SECONDS, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("cluster_secrets")
    op.drop_table("control_demand")

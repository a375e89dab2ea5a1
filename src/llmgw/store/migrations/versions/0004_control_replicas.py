"""The replica set the leading control plane publishes, for the routers of the servers
that follow it.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_SECONDS = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "control_replicas",
        sa.Column("replica_id", sa.Text, primary_key=True),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("engine", sa.Text, nullable=False),
        sa.Column("weight", sa.Float(precision=53), nullable=False),
        sa.Column("pool", sa.Text, nullable=False),
        sa.Column("labels", sa.Text, nullable=False),
        sa.Column("term", sa.BigInteger, nullable=False),
        sa.Column("updated_at", _SECONDS, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("control_replicas")

"""The control plane's tables: the leader lease several control planes contend for on a
shared store, and the runtime catalog changes laid over the configuration's models.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_SECONDS = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "control_lease",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("term", sa.BigInteger, nullable=False),
        sa.Column("acquired_at", _SECONDS, nullable=False),
        sa.Column("expires_at", _SECONDS, nullable=False),
    )
    op.create_table(
        "catalog_models",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("definition", sa.Text, nullable=True),
        sa.Column("updated_at", _SECONDS, nullable=False),
        sa.Column("updated_by", sa.Text, nullable=False, server_default=""),
    )
    op.create_index("ix_catalog_models_updated_at", "catalog_models", ["updated_at"])


def downgrade() -> None:
    op.drop_table("catalog_models")
    op.drop_table("control_lease")

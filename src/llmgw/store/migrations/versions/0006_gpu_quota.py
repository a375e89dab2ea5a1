"""A GPU quota per organisation, team and project: the devices (whole cards or MIG
instances) the models it owns may hold together. NULL, as every existing row gets, is
no quota.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_TABLES = ("orgs", "teams", "projects")


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("gpu_quota", sa.Integer, nullable=True))


def downgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("gpu_quota")

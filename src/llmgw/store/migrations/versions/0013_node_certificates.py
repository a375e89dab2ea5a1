"""Node certificates: each one `llmgw node add` issued (serial, node, not-after) and when
`llmgw node remove` revoked it, read by the control plane to refuse a revoked node.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_SECONDS = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "node_certificates",
        sa.Column("serial", sa.Text, primary_key=True),
        sa.Column("node_id", sa.Text, nullable=False),
        sa.Column("not_after", _SECONDS, nullable=False),
        sa.Column("issued_at", _SECONDS, nullable=False),
        sa.Column("revoked_at", _SECONDS, nullable=True),
    )
    op.create_index("ix_node_certificates_node", "node_certificates", ["node_id"])


def downgrade() -> None:
    op.drop_index("ix_node_certificates_node", "node_certificates")
    op.drop_table("node_certificates")

"""Files and batches of the OpenAI Files and Batch APIs (llmgw.batch): file metadata
(the bytes live under the state directory), each batch's state and the lease of the
gateway running it.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_SECONDS = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "batch_files",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("purpose", sa.Text, nullable=False),
        sa.Column("filename", sa.Text, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("created_at", _SECONDS, nullable=False),
        sa.Column("expires_at", _SECONDS, nullable=True),
    )
    op.create_index("ix_batch_files_owner", "batch_files", ["owner", "created_at"])
    op.create_index("ix_batch_files_expires", "batch_files", ["expires_at"])
    op.create_table(
        "batch_jobs",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("key_hash", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("created_at", _SECONDS, nullable=False),
        sa.Column("updated_at", _SECONDS, nullable=False),
        sa.Column("runner", sa.Text, nullable=True),
        sa.Column("lease_until", _SECONDS, nullable=True),
    )
    op.create_index("ix_batch_jobs_owner", "batch_jobs", ["owner", "created_at"])
    op.create_index("ix_batch_jobs_status", "batch_jobs", ["status"])


def downgrade() -> None:
    op.drop_index("ix_batch_jobs_status", "batch_jobs")
    op.drop_index("ix_batch_jobs_owner", "batch_jobs")
    op.drop_table("batch_jobs")
    op.drop_index("ix_batch_files_expires", "batch_files")
    op.drop_index("ix_batch_files_owner", "batch_files")
    op.drop_table("batch_files")

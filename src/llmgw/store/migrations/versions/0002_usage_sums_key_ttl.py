"""Five-minute usage sums beside the per-request records, filled from the records
already there; and a key-lifetime bound per organisation, team and project.

The sums are what totals, charts and `llmgw usage` read, and what `usage_retention`
never prunes: only the records, the table that grows by a row per request, are.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

BUCKET_SECONDS = 300


def upgrade() -> None:
    op.create_table(
        "usage_sums",
        sa.Column("bucket", sa.BigInteger, primary_key=True),
        sa.Column("org_id", sa.Text, primary_key=True),
        sa.Column("team_id", sa.Text, primary_key=True),
        sa.Column("project_id", sa.Text, primary_key=True),
        sa.Column("user_id", sa.Text, primary_key=True),
        sa.Column("key_id", sa.Text, primary_key=True),
        sa.Column("model", sa.Text, primary_key=True),
        sa.Column("requests", sa.BigInteger, nullable=False),
        sa.Column("errors", sa.BigInteger, nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger, nullable=False),
        sa.Column("completion_tokens", sa.BigInteger, nullable=False),
        sa.Column("cost_micros", sa.BigInteger, nullable=False),
    )
    # The records kept so far become sums, so no total changes across the upgrade.
    # SQLite's CAST truncates (ts is positive, so that is a floor); PostgreSQL's rounds.
    sqlite = op.get_bind().dialect.name == "sqlite"
    bucket = (
        f"CAST(ts / {BUCKET_SECONDS} AS INTEGER)"
        if sqlite
        else f"CAST(FLOOR(ts / {BUCKET_SECONDS}) AS BIGINT)"
    )
    op.execute(
        sa.text(
            f"""
            INSERT INTO usage_sums (bucket, org_id, team_id, project_id, user_id, key_id, model,
                                    requests, errors, prompt_tokens, completion_tokens, cost_micros)
            SELECT {bucket} * {BUCKET_SECONDS},
                   COALESCE(org_id, ''), COALESCE(team_id, ''), COALESCE(project_id, ''),
                   COALESCE(user_id, ''), COALESCE(key_id, ''), model,
                   COUNT(*), SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END),
                   SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_micros)
            FROM usage_records
            GROUP BY 1, 2, 3, 4, 5, 6, 7
            """
        )
    )
    for table in ("orgs", "teams", "projects"):
        op.add_column(table, sa.Column("max_key_ttl_s", sa.Float(precision=53), nullable=True))


def downgrade() -> None:
    for table in ("orgs", "teams", "projects"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("max_key_ttl_s")
    op.drop_table("usage_sums")

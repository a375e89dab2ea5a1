"""The first schema: tenancy (orgs, teams, projects, users, memberships), API keys,
per-request usage records, the budgets' spend ledger, shared rate-limit counters and
the gateways' heartbeats.

Revision ID: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_SECONDS = sa.Float(precision=53)


def _scope_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("rpm", sa.Integer, nullable=True),
        sa.Column("tpm", sa.Integer, nullable=True),
        sa.Column("budget_micros", sa.BigInteger, nullable=True),
        sa.Column("budget_period", sa.Text, nullable=True),
        sa.Column("allowed_models", sa.Text, nullable=True),
        sa.Column("band", sa.Text, nullable=True),
        sa.Column("created_at", _SECONDS, nullable=False),
        sa.Column("updated_at", _SECONDS, nullable=False),
    ]


def upgrade() -> None:
    op.create_table("orgs", sa.Column("id", sa.Text, primary_key=True), *_scope_columns())
    op.create_table(
        "teams",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("org_id", sa.Text, sa.ForeignKey("orgs.id"), nullable=False),
        *_scope_columns(),
    )
    op.create_table(
        "projects",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("team_id", sa.Text, sa.ForeignKey("teams.id"), nullable=False),
        *_scope_columns(),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("email", sa.Text, nullable=True),
        sa.Column("disabled", sa.Boolean, nullable=False, server_default=sa.false()),
        *_scope_columns(),
    )
    for table in ("orgs", "teams", "projects", "users"):
        op.create_index(f"ix_{table}_updated_at", table, ["updated_at"])
    op.create_index("ix_teams_org_id", "teams", ["org_id"])
    op.create_index("ix_projects_team_id", "projects", ["team_id"])
    op.create_table(
        "memberships",
        sa.Column("user_id", sa.Text, sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("project_id", sa.Text, sa.ForeignKey("projects.id"), primary_key=True),
        sa.Column("role", sa.Text, nullable=False, server_default="member"),
        sa.Column("created_at", _SECONDS, nullable=False),
    )
    op.create_index("ix_memberships_project_id", "memberships", ["project_id"])
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("hash", sa.Text, nullable=False, unique=True),
        sa.Column("name", sa.Text, nullable=False, server_default=""),
        sa.Column("project_id", sa.Text, sa.ForeignKey("projects.id"), nullable=True),
        sa.Column("user_id", sa.Text, sa.ForeignKey("users.id"), nullable=True),
        sa.Column("band", sa.Text, nullable=True),
        sa.Column("rpm", sa.Integer, nullable=True),
        sa.Column("tpm", sa.Integer, nullable=True),
        sa.Column("created_at", _SECONDS, nullable=False),
        sa.Column("expires_at", _SECONDS, nullable=True),
        sa.Column("revoked_at", _SECONDS, nullable=True),
        sa.Column("updated_at", _SECONDS, nullable=False),
    )
    op.create_index("ix_api_keys_project_id", "api_keys", ["project_id"])
    op.create_index("ix_api_keys_user_id", "api_keys", ["user_id"])
    op.create_index("ix_api_keys_updated_at", "api_keys", ["updated_at"])
    op.create_table(
        "usage_records",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("ts", _SECONDS, nullable=False),
        sa.Column("request_id", sa.Text, nullable=False),
        sa.Column("key_id", sa.Text, nullable=True),
        sa.Column("user_id", sa.Text, nullable=True),
        sa.Column("project_id", sa.Text, nullable=True),
        sa.Column("team_id", sa.Text, nullable=True),
        sa.Column("org_id", sa.Text, nullable=True),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("replica", sa.Text, nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("stream", sa.Boolean, nullable=False),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("cost_micros", sa.BigInteger, nullable=False),
        sa.Column("queue_s", _SECONDS, nullable=False),
        sa.Column("ttft_s", _SECONDS, nullable=True),
        sa.Column("duration_s", _SECONDS, nullable=False),
        sa.Column("tags", sa.Text, nullable=True),
    )
    op.create_index("ix_usage_records_ts", "usage_records", ["ts"])
    op.create_index("ix_usage_records_request_id", "usage_records", ["request_id"])
    op.create_table(
        "spend",
        sa.Column("scope", sa.Text, primary_key=True),
        sa.Column("period", sa.Text, primary_key=True),
        sa.Column("period_start", sa.BigInteger, primary_key=True),
        sa.Column("cost_micros", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "limit_counters",
        sa.Column("scope", sa.Text, primary_key=True),
        sa.Column("window_start", sa.BigInteger, primary_key=True),
        sa.Column("gateway", sa.Text, primary_key=True),
        sa.Column("requests", sa.BigInteger, nullable=False),
        sa.Column("tokens", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_limit_counters_window_start", "limit_counters", ["window_start"])
    op.create_table(
        "gateways",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", _SECONDS, nullable=False),
        sa.Column("last_seen", _SECONDS, nullable=False),
    )


def downgrade() -> None:
    for table in (
        "gateways",
        "limit_counters",
        "spend",
        "usage_records",
        "api_keys",
        "memberships",
        "users",
        "projects",
        "teams",
        "orgs",
    ):
        op.drop_table(table)

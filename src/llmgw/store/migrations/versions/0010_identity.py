"""People who sign in: their identity provider's names for them, a status for signup
with approval, groups from the identity provider and the teams that name them, roles
per team and per organisation, and browser sessions.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_SECONDS = sa.Float(precision=53)


def upgrade() -> None:
    op.add_column("users", sa.Column("name", sa.Text, nullable=True))
    op.add_column("users", sa.Column("subject", sa.Text, nullable=True))
    op.add_column("users", sa.Column("external_id", sa.Text, nullable=True))
    op.add_column("users", sa.Column("status", sa.Text, nullable=False, server_default="active"))
    op.add_column("users", sa.Column("signup_reason", sa.Text, nullable=True))
    op.add_column("users", sa.Column("version", sa.Integer, nullable=False, server_default="1"))
    op.create_index("ix_users_subject", "users", ["subject"], unique=True)
    op.create_index("ix_users_external_id", "users", ["external_id"], unique=True)
    op.create_index("ix_users_email", "users", ["email"])
    op.add_column("teams", sa.Column("idp_group", sa.Text, nullable=True))
    op.create_index("ix_teams_idp_group", "teams", ["idp_group"], unique=True)
    op.create_table(
        "team_memberships",
        sa.Column("user_id", sa.Text, sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("team_id", sa.Text, sa.ForeignKey("teams.id"), primary_key=True, index=True),
        sa.Column("role", sa.Text, nullable=False, server_default="member"),
        sa.Column("source", sa.Text, nullable=False, server_default="manual"),
        sa.Column("created_at", _SECONDS, nullable=False),
    )
    op.create_table(
        "org_memberships",
        sa.Column("user_id", sa.Text, sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("org_id", sa.Text, sa.ForeignKey("orgs.id"), primary_key=True, index=True),
        sa.Column("role", sa.Text, nullable=False, server_default="member"),
        sa.Column("created_at", _SECONDS, nullable=False),
    )
    op.create_table(
        "idp_groups",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("display_name", sa.Text, nullable=False, unique=True),
        sa.Column("external_id", sa.Text, nullable=True, unique=True),
        sa.Column("version", sa.Integer, nullable=False, server_default="1"),
        sa.Column("created_at", _SECONDS, nullable=False),
        sa.Column("updated_at", _SECONDS, nullable=False),
    )
    op.create_table(
        "idp_group_members",
        sa.Column("group_id", sa.Text, sa.ForeignKey("idp_groups.id"), primary_key=True),
        sa.Column("user_id", sa.Text, sa.ForeignKey("users.id"), primary_key=True, index=True),
    )
    op.create_table(
        "browser_sessions",
        sa.Column("id_hash", sa.Text, primary_key=True),
        sa.Column("user_id", sa.Text, sa.ForeignKey("users.id"), nullable=False, index=True),
        sa.Column("csrf_token", sa.Text, nullable=False),
        sa.Column("created_at", _SECONDS, nullable=False),
        sa.Column("last_seen_at", _SECONDS, nullable=False),
        sa.Column("expires_at", _SECONDS, nullable=False, index=True),
    )
    op.create_table(
        "oidc_logins",
        sa.Column("state_hash", sa.Text, primary_key=True),
        sa.Column("nonce", sa.Text, nullable=False),
        sa.Column("code_verifier", sa.Text, nullable=False),
        sa.Column("return_to", sa.Text, nullable=False, server_default="/"),
        sa.Column("expires_at", _SECONDS, nullable=False, index=True),
    )


def downgrade() -> None:
    op.drop_table("oidc_logins")
    op.drop_table("browser_sessions")
    op.drop_table("idp_group_members")
    op.drop_table("idp_groups")
    op.drop_table("org_memberships")
    op.drop_table("team_memberships")
    op.drop_index("ix_teams_idp_group", "teams")
    op.drop_column("teams", "idp_group")
    for index in ("ix_users_email", "ix_users_external_id", "ix_users_subject"):
        op.drop_index(index, "users")
    for column in ("version", "signup_reason", "status", "external_id", "subject", "name"):
        op.drop_column("users", column)

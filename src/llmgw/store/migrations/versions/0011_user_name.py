"""A person's user name at the identity provider (SCIM `userName`), which may change
while their llmgw id, named by keys, memberships and usage, stays.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("users", sa.Column("user_name", sa.Text, nullable=True))
    op.create_index("ix_users_user_name", "users", ["user_name"], unique=True)
    # What SCIM's case-insensitive `userName eq` looks people up by.
    op.create_index("ix_users_login", "users", [sa.text("lower(coalesce(user_name, id))")])


def downgrade() -> None:
    op.drop_index("ix_users_login", "users")
    op.drop_index("ix_users_user_name", "users")
    op.drop_column("users", "user_name")

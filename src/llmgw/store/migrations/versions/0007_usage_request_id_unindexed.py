"""Usage records lose their index on request_id.

Request ids are random, so each record's entry landed at a random place in that index:
on SQLite it was half the cost of writing a record (5 of 11 µs a row, measured with
sqlite3 alone on the router benchmark's records), and nothing looks a record up by its
id. A record is found by time (the ts index) and by key; `llmgw ctl request` reads
them that way.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_usage_records_request_id", table_name="usage_records")


def downgrade() -> None:
    op.create_index("ix_usage_records_request_id", "usage_records", ["request_id"])

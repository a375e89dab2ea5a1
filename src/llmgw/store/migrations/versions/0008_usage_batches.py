"""Usage records are kept a batch to a row: `usage_batches`, and the view `usage_records`.

A row per request made the store's work per record the larger part of what auth costs
a request (SQLite's statement, its binding of ten values through the sqlite3 module,
the row and its time index: 12,000 instructions a record, against 280,000 for all the
rest the gateway does for a request). Records are written in batches anyway, and read
only a batch at a time (the newest, by time and key), so a row now holds the records of
one batch that share a caller, model, status and streaming: those in columns, each
record's own values in a JSON array (ts, request id, replica, prompt and completion
tokens, cost, seconds queued, to the first byte and in all, tags). Writing one costs
SQLite one row for a few hundred records; pruning deletes whole batches by their newest
record's time. The view `usage_records` shows them as before, a record to a row, for
whoever reads the store with SQL. The records already there move into batches of at
most 1,000.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_SECONDS = sa.Float(precision=53)
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_KEY = "key_id, user_id, project_id, team_id, org_id, model, status, stream"
_VALUES = (
    "ts, request_id, replica, prompt_tokens, completion_tokens, cost_micros, queue_s, ttft_s, duration_s"
)

# A record's place in its batch's array, and the type each dialect reads it back as.
_FIELDS = (
    ("ts", "double precision"),
    ("request_id", None),
    ("replica", None),
    ("prompt_tokens", "bigint"),
    ("completion_tokens", "bigint"),
    ("cost_micros", "bigint"),
    ("queue_s", "double precision"),
    ("ttft_s", "double precision"),
    ("duration_s", "double precision"),
    ("tags", None),
)


def _view_sql(dialect: str) -> str:
    key = ", ".join(f"b.{column}" for column in _KEY.split(", "))
    if dialect == "postgresql":
        fields = ", ".join(
            f"(r.value->>{i})::{cast} AS {name}" if cast else f"r.value->>{i} AS {name}"
            for i, (name, cast) in enumerate(_FIELDS)
        )
        source = (
            "usage_batches AS b CROSS JOIN LATERAL "
            "jsonb_array_elements(b.records::jsonb) WITH ORDINALITY AS r(value, position)"
        )
        position = "r.position - 1"
    else:
        fields = ", ".join(
            f"json_extract(r.value, '$[{i}]') AS {name}" for i, (name, _) in enumerate(_FIELDS)
        )
        source = "usage_batches AS b, json_each(b.records) AS r"
        position = "r.key"
    return (
        f"CREATE VIEW usage_records AS SELECT b.id AS batch_id, {position} AS position, "
        f"{key}, {fields} FROM {source}"
    )


def upgrade() -> None:
    op.create_table(
        "usage_batches",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("key_id", sa.Text, nullable=True),
        sa.Column("user_id", sa.Text, nullable=True),
        sa.Column("project_id", sa.Text, nullable=True),
        sa.Column("team_id", sa.Text, nullable=True),
        sa.Column("org_id", sa.Text, nullable=True),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("stream", sa.Boolean, nullable=False),
        sa.Column("first_ts", _SECONDS, nullable=False),
        sa.Column("last_ts", _SECONDS, nullable=False),
        sa.Column("record_count", sa.Integer, nullable=False),
        sa.Column("records", sa.Text, nullable=False),
    )
    op.create_index("ix_usage_batches_last_ts", "usage_batches", ["last_ts"])
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        records = f"json_agg(json_build_array({_VALUES}, tags::json) ORDER BY id)::text"
        source = "usage_records"
    else:
        records = f"json_group_array(json_array({_VALUES}, json(tags)))"
        source = "(SELECT * FROM usage_records ORDER BY id)"
    op.execute(
        f"INSERT INTO usage_batches ({_KEY}, first_ts, last_ts, record_count, records) "
        f"SELECT {_KEY}, min(ts), max(ts), count(*), {records} FROM {source} AS old "
        f"GROUP BY {_KEY}, id / 1000"
    )
    op.drop_index("ix_usage_records_ts", table_name="usage_records")
    op.drop_table("usage_records")
    op.execute(_view_sql(dialect))


def downgrade() -> None:
    op.create_table(
        "usage_records_0007",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
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
    columns = f"{_KEY}, {_VALUES}, tags"
    op.execute(
        f"INSERT INTO usage_records_0007 ({columns}) "
        f"SELECT {columns} FROM usage_records ORDER BY batch_id, position"
    )
    op.execute("DROP VIEW usage_records")
    op.drop_index("ix_usage_batches_last_ts", table_name="usage_batches")
    op.drop_table("usage_batches")
    op.rename_table("usage_records_0007", "usage_records")
    op.create_index("ix_usage_records_ts", "usage_records", ["ts"])

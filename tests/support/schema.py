"""The differences between a migrated database and `llmgw.store.schema`, for the tests
that check the migrations build exactly the tables the queries are written against."""

from __future__ import annotations

import warnings

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from llmgw.store import schema


def schema_differences(connection: sa.Connection) -> list[object]:
    with warnings.catch_warnings():
        # SQLite's reflection cannot read an index on an expression (users' ix_users_login,
        # migration 0011): it says so, and the comparison leaves such an index out.
        warnings.filterwarnings(
            "ignore", "Skipped unsupported reflection of expression-based index", sa.exc.SAWarning
        )
        warnings.filterwarnings(
            "ignore", "autogenerate skipping metadata-specified expression-based index", UserWarning
        )
        return list(compare_metadata(MigrationContext.configure(connection), schema.metadata))

"""Alembic's environment for the store: migrations run on the connection that
`llmgw.store.migrate` hands over, never on one of their own, so the same code upgrades
SQLite and PostgreSQL from inside a running server or a test."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, render_as_batch=True, transaction_per_migration=False)
with context.begin_transaction():
    context.run_migrations()

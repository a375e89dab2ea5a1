"""Alembic's migrations of the store's schema, run by `llmgw.store.migrate`."""

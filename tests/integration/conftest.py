"""Fixtures every integration suite may use: the PostgreSQL server (one per session)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.postgres import postgres_server as provide_postgres


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The test PostgreSQL server's DSN (to its maintenance database); its DSN is also
    put in LLMGW_TEST_POSTGRES_DSN, so processes the tests start find the same server."""
    with provide_postgres() as dsn, pytest.MonkeyPatch.context() as patch:
        patch.setenv("LLMGW_TEST_POSTGRES_DSN", dsn)
        yield dsn

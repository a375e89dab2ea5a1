"""Fixtures for the whole suite: every test starts from an environment without the
caller's llmgw settings or proxies.

An `LLMGW_*` variable in the shell that runs the tests would overlay the
configuration of every server and CLI a test starts (and of `Settings` built in
process), and an HTTP proxy variable would send the tests' loopback requests through
a proxy (httpx and the openai SDK honour them). `LLMGW_TEST_*` are the suite's own
(the PostgreSQL server it shares across tests) and stay.
"""

from __future__ import annotations

import os

import pytest

_PROXY_VARIABLES = frozenset({"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"})


@pytest.fixture(autouse=True)
def _no_llmgw_settings_or_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        upper = name.upper()
        if upper in _PROXY_VARIABLES or (upper.startswith("LLMGW_") and not upper.startswith("LLMGW_TEST_")):
            monkeypatch.delenv(name)

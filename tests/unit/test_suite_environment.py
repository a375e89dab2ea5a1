"""The suite's own environment fixture (tests/conftest.py) holds for every test."""

from __future__ import annotations

import os


def test_no_llmgw_setting_or_proxy_reaches_a_test() -> None:
    leaked = [
        name
        for name in os.environ
        if name.upper() in {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"}
        or (name.upper().startswith("LLMGW_") and not name.upper().startswith("LLMGW_TEST_"))
    ]
    assert leaked == []

"""A gateway for the sign-in tests (auth on, OIDC against the loopback provider of
support.oidc_provider) and the calls those tests make of it: the admin API, the CLI as
a process of its own, and polling until a change reaches the gateway."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from llmgw.testing.server import GatewayProcess, free_port, start_gateway

SECRET_ENV = "OIDC_TEST_CLIENT_SECRET"
_POLL_S = 0.05
_POLL_LIMIT_S = 15.0


def signin_gateway(
    issuer: str, where: Path, *, settings: dict[str, Any] | None = None, **auth: Any
) -> GatewayProcess:
    """A router-only gateway with auth on and OIDC at `issuer` (its client secret from
    the environment); `auth` adds or replaces `auth` settings (`oidc` is merged),
    `settings` other top-level ones (`landing`)."""
    oidc = {"issuer": issuer, "client_id": "llmgw", "client_secret_file": f"env:{SECRET_ENV}"}
    oidc.update(auth.pop("oidc", {}))
    config = {
        "auth": {
            "enabled": True,
            "store": str(where / "llmgw.db"),
            "cache_ttl": "200ms",
            "negative_ttl": "200ms",
            "oidc": oidc,
            **auth,
        },
        # Sign-in and /v1/models need no replica, so one that is not there will do.
        "endpoints": [
            {"id": "none", "url": f"http://127.0.0.1:{free_port()}", "models": ["m"], "engine": "sim"}
        ],
        **(settings or {}),
    }
    return start_gateway(config, env={**os.environ, SECRET_ENV: "s3cret"})


def admin_call(
    gateway: GatewayProcess, method: str, path: str, body: dict[str, Any] | None = None
) -> httpx.Response:
    headers = {"authorization": f"Bearer {gateway.admin_token()}"}
    return httpx.request(method, gateway.admin_url + "/api/" + path, json=body, headers=headers, timeout=10)


def cli_call(gateway: GatewayProcess, group: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`llmgw GROUP --admin URL --token-file FILE ARGS...` as a process of its own."""
    token_file = str(gateway.config_path.parent / "secrets" / "admin-token")
    command = [sys.executable, "-m", "llmgw", group, "--admin", gateway.admin_url, "--token-file", token_file]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=60, check=False)


def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _POLL_LIMIT_S
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(_POLL_S)

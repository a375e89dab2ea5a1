"""The command line's side of the admin API: JSON over HTTP with the admin token, and
where that token comes from.

The token is, first found: `--token`, `LLMGW_ADMIN_TOKEN`, `--token-file`, the file the
server configuration names (`--config`), or the default places the server makes it
(the service state directory's `admin-token`, then `secrets/admin-token` here).
"""

from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from llmgw.auth import admin_token
from llmgw.config import load_settings

DEFAULT_ADMIN_URL = "http://127.0.0.1:9090"
TIMEOUT_S = 30.0


class AdminError(Exception):
    """The admin API refused, or could not be reached; the message says which and why,
    and `status` is the refusal's HTTP status (None when it could not be reached)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def find_token(
    token: str | None, token_file: Path | None, config: Path | None, env: Mapping[str, str] = os.environ
) -> str:
    if token:
        return token
    if env.get("LLMGW_ADMIN_TOKEN"):
        return env["LLMGW_ADMIN_TOKEN"]
    candidates: list[Path] = []
    if token_file is not None:
        candidates.append(token_file)
    if config is not None:
        settings = load_settings(config)
        candidates.append(settings.effective_admin_token_file(config.parent, env.get("STATE_DIRECTORY")))
    if env.get("STATE_DIRECTORY"):
        candidates.append(Path(env["STATE_DIRECTORY"]) / "admin-token")
    candidates += [Path("/var/lib/llmgw/admin-token"), Path("secrets/admin-token")]
    for path in candidates:
        try:
            return admin_token.read(path)
        except OSError:
            continue
    raise AdminError(
        "no admin token: pass --token, set LLMGW_ADMIN_TOKEN, or point --token-file (or --config) at the "
        "server's admin_token_file"
    )


class AdminClient:
    """Calls to one server's admin API."""

    def __init__(self, base_url: str, token: str) -> None:
        self._base = base_url.rstrip("/")
        self._token = token

    def call(
        self, method: str, path: str, body: Mapping[str, Any] | bytes | None = None, **query: str | None
    ) -> Any:
        """One call; a mapping body goes as JSON, bytes as they are (a YAML definition)."""
        params = {k: v for k, v in query.items() if v is not None}
        url = f"{self._base}/api/{path.lstrip('/')}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        raw = isinstance(body, bytes)
        data = body if isinstance(body, bytes) else orjson.dumps(dict(body)) if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("authorization", f"Bearer {self._token}")
        if data is not None:
            request.add_header("content-type", "application/yaml" if raw else "application/json")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
                return orjson.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as exc:
            with exc:
                raise AdminError(_refusal(exc), exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise AdminError(f"cannot reach the admin API at {self._base}: {reason}") from None


def _refusal(exc: urllib.error.HTTPError) -> str:
    try:
        message = orjson.loads(exc.read())["error"]["message"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        message = exc.reason
    return f"{exc.code}: {message}"

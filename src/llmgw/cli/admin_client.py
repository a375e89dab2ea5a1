"""The command line's side of the admin API: JSON over HTTP with the admin token, and
where the API and that token are found.

Each is taken from the first place that has it, explicit options first:

- the address: `--admin`, `LLMGW_ADMIN`, the `admin_listen` of the server configuration
  `--config` names, else http://127.0.0.1:9090;
- the token: `--token`, `--token-file`, `LLMGW_ADMIN_TOKEN`, the `admin_token_file` of
  the `--config` configuration, else the default places the server makes it (the
  service state directory's `admin-token`, then `secrets/admin-token` here).

A place that was named and fails (a `--config` that does not load, a `--token-file`
that cannot be read) is an error saying so, never a silent fall to the next place: the
next place is likely another server's.
"""

from __future__ import annotations

import dataclasses
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from llmgw.admin import token as admin_token
from llmgw.config import Settings, load_settings
from llmgw.config.values import split_host_port
from llmgw.errors import ConfigError

DEFAULT_ADMIN_URL = "http://127.0.0.1:9090"
ADMIN_ENV = "LLMGW_ADMIN"
TOKEN_ENV = "LLMGW_ADMIN_TOKEN"
TIMEOUT_S = 30.0
# Addresses a listener binds to mean "every interface"; the client dials this machine.
_WILDCARDS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}


class AdminError(Exception):
    """The admin API refused, or could not be reached; the message says which and why,
    and `status` is the refusal's HTTP status (None when it could not be reached)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Connection:
    """The connection options as given on the command line; None where not given."""

    admin: str | None = None
    token: str | None = None
    token_file: Path | None = None
    config: Path | None = None

    def over(self, below: Connection) -> Connection:
        """These options, with `below`'s (a command group's) where these are not given."""
        return Connection(
            **{
                field.name: getattr(self, field.name)
                if getattr(self, field.name) is not None
                else getattr(below, field.name)
                for field in dataclasses.fields(self)
            }
        )


def open_client(given: Connection, env: Mapping[str, str] = os.environ) -> AdminClient:
    """A client for the admin API the options, the environment or the configuration name."""
    settings = _settings(given.config, env) if given.config is not None else None
    return AdminClient(admin_url(given, settings, env), find_token(given, settings, env))


def admin_url(given: Connection, settings: Settings | None, env: Mapping[str, str]) -> str:
    """The admin API's base URL."""
    if given.admin:
        return _url(given.admin, "--admin")
    if env.get(ADMIN_ENV):
        return _url(env[ADMIN_ENV], ADMIN_ENV)
    if settings is not None:
        return "http://" + dial_address(settings.admin_listen)
    return DEFAULT_ADMIN_URL


def dial_address(listen: str) -> str:
    """The `host:port` to dial for a listener on `listen`: a wildcard (`:9090`,
    `0.0.0.0:9090`, `[::]:9090`) is dialled on this machine."""
    host, port = split_host_port(listen)
    host = _WILDCARDS.get(host, host)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _url(text: str, source: str) -> str:
    """`http://host:port` as given, or `host:port` (a listener's address) made one."""
    if "://" not in text:
        try:
            return "http://" + dial_address(text)
        except ValueError as exc:
            raise AdminError(f"{source} {exc}") from None
    scheme = text.partition("://")[0].lower()
    if scheme not in ("http", "https"):
        raise AdminError(f"{source} {text!r}: give the admin API's address, like {DEFAULT_ADMIN_URL}")
    return text


def _settings(config: Path, env: Mapping[str, str]) -> Settings:
    try:
        return load_settings(config, environ=env)
    except ConfigError as exc:
        first, rest = exc.problems[0], len(exc.problems) - 1
        more = f" (and {rest} more: `llmgw config check {config}` lists them)" if rest else ""
        raise AdminError(f"--config {first}{more}") from None


def find_token(given: Connection, settings: Settings | None, env: Mapping[str, str] = os.environ) -> str:
    """The admin token."""
    if given.token:
        return given.token
    if given.token_file is not None:
        return _read_token(given.token_file, f"--token-file {given.token_file}", "")
    if env.get(TOKEN_ENV):
        return env[TOKEN_ENV]
    if settings is not None and given.config is not None:
        path = settings.effective_admin_token_file(given.config.parent, env.get("STATE_DIRECTORY"))
        named = f"--config {given.config}: its admin token file {path}"
        return _read_token(path, named, "; is the server started with this configuration?")
    candidates: list[Path] = []
    if env.get("STATE_DIRECTORY"):
        candidates.append(Path(env["STATE_DIRECTORY"]) / "admin-token")
    candidates += [Path("/var/lib/llmgw/admin-token"), Path("secrets/admin-token")]
    for path in candidates:
        try:
            found = admin_token.read(path)
        except OSError:
            continue
        if found:
            return found
    raise AdminError(
        f"no admin token: pass --token or --token-file, set {TOKEN_ENV}, or point --config at the "
        "server's configuration"
    )


def _read_token(path: Path, named: str, hint: str) -> str:
    try:
        found = admin_token.read(path)
    except FileNotFoundError:
        raise AdminError(f"{named}: no such file{hint}") from None
    except OSError as exc:
        raise AdminError(f"{named} cannot be read: {exc.strerror or exc}") from None
    if not found:
        raise AdminError(f"{named} is empty; the server writes the token there when it starts")
    return found


class AdminClient:
    """Calls to one server's admin API."""

    def __init__(self, base_url: str, token: str) -> None:
        self._base = base_url.rstrip("/")
        self._token = token
        self.timeout_s = TIMEOUT_S
        """How long a call may take: longer for one that works while it answers (an eval)."""

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
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
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

"""The connection options of every command that talks to the admin API (`keys`, `orgs`,
`teams`, `projects`, `users`, `usage`, `ctl`), defined once.

People type them where they think of them: before the sub-command (`llmgw keys
--config f.yaml create`) or after it (`llmgw keys create --project p --config f.yaml`).
So each option is taken by the group and by each of its commands, and the command's
value wins over the group's; where neither gives one, admin_client looks in the
environment and the server's configuration (see there for the order).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from llmgw.cli.admin_client import AdminClient, AdminError, Connection, open_client

PANEL = "Connection"
_ADMIN = typer.Option(
    None,
    "--admin",
    metavar="URL",
    help="The admin API (else LLMGW_ADMIN, --config's admin_listen, http://127.0.0.1:9090).",
    rich_help_panel=PANEL,
    show_default=False,
)
_TOKEN = typer.Option(
    None,
    "--token",
    help="The admin token (else LLMGW_ADMIN_TOKEN).",
    rich_help_panel=PANEL,
    show_default=False,
)
_TOKEN_FILE = typer.Option(
    None,
    "--token-file",
    metavar="FILE",
    help="A file holding the admin token.",
    rich_help_panel=PANEL,
    show_default=False,
)
_CONFIG = typer.Option(
    None,
    "--config",
    metavar="FILE",
    help="The server's configuration: its admin_listen and admin_token_file.",
    rich_help_panel=PANEL,
    show_default=False,
)
# The wrapped commands' own parameters are named freely; these names keep clear of them.
_PARAMETERS = (
    inspect.Parameter("connect_admin", inspect.Parameter.KEYWORD_ONLY, default=_ADMIN, annotation=str | None),
    inspect.Parameter("connect_token", inspect.Parameter.KEYWORD_ONLY, default=_TOKEN, annotation=str | None),
    inspect.Parameter(
        "connect_token_file", inspect.Parameter.KEYWORD_ONLY, default=_TOKEN_FILE, annotation=Path | None
    ),
    inspect.Parameter(
        "connect_config", inspect.Parameter.KEYWORD_ONLY, default=_CONFIG, annotation=Path | None
    ),
)
_NAMES = tuple(parameter.name for parameter in _PARAMETERS)

F = TypeVar("F", bound=Callable[..., Any])


def _remember(ctx: typer.Context, given: Connection) -> None:
    """Lays the options given here over those of the groups above (ctx.obj is inherited)."""
    below = ctx.obj if isinstance(ctx.obj, Connection) else Connection()
    ctx.obj = given.over(below)


def connect(
    ctx: typer.Context,
    admin: str | None = _ADMIN,
    token: str | None = _TOKEN,
    token_file: Path | None = _TOKEN_FILE,
    config: Path | None = _CONFIG,
) -> None:
    """Talks to a running server's admin API."""
    _remember(ctx, Connection(admin, token, token_file, config))


def with_connection(command: F) -> F:
    """`command` (whose first parameter is `ctx: typer.Context`) taking the connection
    options too; they are kept in ctx.obj for `client`."""
    signature = inspect.signature(command, eval_str=True)

    @functools.wraps(command)
    def wrapper(ctx: typer.Context, *args: Any, **kwargs: Any) -> Any:
        values = [kwargs.pop(name, None) for name in _NAMES]
        _remember(ctx, Connection(*values))
        return command(ctx, *args, **kwargs)

    parameters = [*signature.parameters.values(), *_PARAMETERS]
    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    return wrapper  # type: ignore[return-value]


class AdminTyper(typer.Typer):
    """A command group over the admin API: the group and each command take the
    connection options."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.callback()(connect)

    def command(self, *args: Any, **kwargs: Any) -> Callable[[F], F]:
        register = super().command(*args, **kwargs)

        def decorator(function: F) -> F:
            register(with_connection(function))
            return function

        return decorator


def fail(exc: Exception) -> typer.Exit:
    """Prints `error: <why>` on stderr; the Exit (status 2) to raise."""
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(code=2)


def client(ctx: typer.Context) -> AdminClient:
    """The client for the admin API the options name; a bad option ends the command."""
    given = ctx.obj if isinstance(ctx.obj, Connection) else Connection()
    try:
        return open_client(given)
    except AdminError as exc:
        raise fail(exc) from None


def call(
    ctx: typer.Context, method: str, path: str, body: dict[str, Any] | None = None, **query: str | None
) -> Any:
    """One admin API call; a refusal ends the command with its message."""
    try:
        return client(ctx).call(method, path, body, **query)
    except AdminError as exc:
        raise fail(exc) from None

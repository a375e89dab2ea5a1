"""`llmgw server`: run the gateway on a configuration, or on the embedded defaults; and
the commands that act on a server's machine and store rather than through its admin
API (`llmgw server rotate-master-key`, and the other sub-commands added to `app`)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from llmgw.cli.startup import (
    LOG_FORMAT_HELP,
    LOG_LEVEL_HELP,
    STRICT_HELP,
    cannot_start,
    checked_log_format,
    configure_logging,
    inert_warnings,
    log_level_number,
    refuse_config,
)
from llmgw.config import load_settings
from llmgw.errors import ConfigError, StoreError

# The server itself (the router, the store, the control plane) is imported when it is
# run, not here: every `llmgw` command loads this module to learn `server`'s options.


app = typer.Typer(
    help="Run the gateway (no sub-command), or act on a server's store and files.",
    invoke_without_command=True,
    no_args_is_help=False,
)


@app.callback()
def server(
    ctx: typer.Context,
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="The YAML configuration; without it, the embedded defaults.",
        show_default=False,
    ),
    log_level: str = typer.Option("info", "--log-level", help=LOG_LEVEL_HELP),
    log_format: str | None = typer.Option(
        None,
        "--log-format",
        help=LOG_FORMAT_HELP + " Default: the setting log_format (text).",
        show_default=False,
    ),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
) -> None:
    """Serve the OpenAI API on `listen`, with health and metrics on `admin_listen`.

    Each setting in use that this version does not act on is a warning line as it starts.
    With a sub-command, that command runs instead (its own options follow its name)."""
    if ctx.invoked_subcommand is not None:
        if config is not None or strict or log_format is not None:
            raise typer.BadParameter(
                f"give the options after the sub-command: llmgw server {ctx.invoked_subcommand} --config FILE"
            )
        return
    import uvloop  # noqa: PLC0415 (see the imports)

    from llmgw.server.embedded import describe, embedded_settings  # noqa: PLC0415
    from llmgw.server.runner import serve  # noqa: PLC0415

    # Both refused before anything starts; the format is the setting's unless given.
    log_level_number(log_level)
    checked_log_format(log_format)
    try:
        if config is None:
            with embedded_settings(dict(os.environ)) as settings:
                configure_logging(log_level, log_format or settings.log_format)
                typer.echo(describe(settings), err=True)
                inert_warnings(settings, strict=strict)
                uvloop.run(serve(settings))
        else:
            settings = load_settings(config)
            configure_logging(log_level, log_format or settings.log_format)
            inert_warnings(settings, strict=strict)
            uvloop.run(serve(settings, config_dir=config.parent))
    except ConfigError as exc:
        raise refuse_config(exc) from None
    except StoreError as exc:
        typer.echo(f"llmgw server could not open its store (auth.store): {exc}", err=True)
        raise typer.Exit(code=1) from None
    except OSError as exc:
        raise cannot_start("server", exc) from None


@app.command("rotate-master-key")
def rotate_master_key(
    config: Path = typer.Option(..., "--config", "-c", help="The server's YAML configuration."),
    new_key: str = typer.Option(
        ...,
        "--new-key",
        help="The new key: a file or env:VARIABLE holding 64 hex digits (openssl rand -hex 32),"
        " vault:mount/path#field, or vault-transit:KEY.",
        show_default=False,
    ),
) -> None:
    """Seal every secret the store keeps again, under a new master key.

    Each is opened with secrets.master_key (plaintext rows as they are); nothing is written unless all open.

    Then set secrets.master_key to the new key and restart the servers (see docs/operations.md)."""
    import asyncio  # noqa: PLC0415 (see the imports)

    from llmgw.server.rotate import rotate_master_key as rotate  # noqa: PLC0415

    try:
        settings = load_settings(config)
        resealed, kept, key_id = asyncio.run(rotate(settings, config.parent, new_key))
    except ConfigError as exc:
        raise refuse_config(exc) from None
    except StoreError as exc:
        typer.echo(f"llmgw server rotate-master-key could not open the store (auth.store): {exc}", err=True)
        raise typer.Exit(code=1) from None
    typer.echo(
        f"sealed {resealed} secret(s) under key {key_id} ({kept} already were); "
        "now set secrets.master_key to the new key and restart the servers"
    )

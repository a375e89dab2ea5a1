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


BACKUP_NICENESS = 10

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


@app.command("init")
def init(
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="The server's YAML configuration: its agent_tls paths are used if set, else written into it"
        " (the file is made if missing).",
        show_default=False,
    ),
    names: list[str] = typer.Option(
        [],
        "--name",
        help="A DNS name agents dial the control plane by (repeat for several).",
        show_default=False,
    ),
    ips: list[str] = typer.Option(
        [],
        "--ip",
        help="An address agents dial the control plane by (repeat for several).",
        show_default=False,
    ),
    directory: Path | None = typer.Option(
        None,
        "--dir",
        help="Where the CA and the server's certificate go. Default: tls/ beside the configuration"
        " (or in this folder without one).",
        show_default=False,
    ),
    force: bool = typer.Option(
        False, "--force", help="Replace an existing cluster CA (its node certificates stop working)."
    ),
) -> None:
    """Make the cluster CA, the control plane's certificate and the admin token.

    Files are mode 0600 in folders 0700. Then issue each node's certificate with llmgw node add."""
    from datetime import UTC, datetime  # noqa: PLC0415 (see the imports)

    from llmgw.admin.token import load_or_create  # noqa: PLC0415
    from llmgw.pki import ClusterFiles, init_cluster  # noqa: PLC0415
    from llmgw.pki.config_file import add_block, block, configured_files  # noqa: PLC0415

    try:
        # An existing configuration is checked before anything is written.
        checked = load_settings(config) if config is not None and config.is_file() else None
        files = configured_files(config) if config is not None else None
        written = files is not None
        if files is not None and directory is not None and files.ca_cert.parent != directory.absolute():
            raise ConfigError(
                [
                    f"--dir {directory}: {config} already names the CA at {files.ca_cert}:"
                    " drop --dir, or remove agent_tls from the configuration"
                ]
            )
        if files is None:
            base = config.parent if config is not None else Path()
            files = ClusterFiles.in_dir(directory or base / "tls")
        authority, server_cert = init_cluster(files, names, ips, datetime.now(UTC), force=force)
        if config is not None and not written:
            add_block(config, files)
        state_directory = os.environ.get("STATE_DIRECTORY")
        if config is not None:
            settings = checked or load_settings(config)
            token_file = settings.effective_admin_token_file(config.parent, state_directory)
        else:
            # Where the server on its embedded defaults looks for it.
            token_file = (
                Path(state_directory) / "admin-token" if state_directory else Path("secrets", "admin-token")
            )
        load_or_create(token_file)
    except ConfigError as exc:
        raise refuse_config(exc) from None
    except OSError as exc:
        typer.echo(f"llmgw server init could not write its files: {exc}", err=True)
        raise typer.Exit(code=1) from None
    typer.echo(
        f"cluster CA: {files.ca_cert} (key {files.ca_key}), valid until {authority.not_after:%Y-%m-%d}"
    )
    typer.echo(
        f"control plane certificate: {files.server_cert} (key {files.server_key}),"
        f" valid until {server_cert.not_after:%Y-%m-%d}"
    )
    typer.echo(f"admin token: {token_file}")
    if config is None:
        typer.echo("put this in the server's configuration:\n" + block(files))
    elif not written:
        typer.echo(f"agent_tls written into {config}")
    typer.echo("next: llmgw node add NAME for each machine that runs an agent")


@app.command("backup")
def backup(
    config: Path = typer.Option(..., "--config", "-c", help="The server's YAML configuration."),
) -> None:
    """Write one archive of the store, the runtime catalog and the cluster CA into backup_dir.

    The store holds keys, tenancy, limits, usage and the runtime catalog;
    the CA is agent_tls's files; the configuration file travels too.

    It is encrypted to backup_recipients with age (without any: mode 0600),
    copied to each backup_copy_to, and the newest backup_keep kept everywhere.

    Safe while the server runs. See docs/operations.md#backups."""
    import asyncio  # noqa: PLC0415 (see the imports)
    import time  # noqa: PLC0415

    from llmgw.backup import run_backup, sources  # noqa: PLC0415
    from llmgw.errors import BackupError  # noqa: PLC0415

    # Background work: the gateway on this machine comes first for the CPU (compression
    # and age are most of the backup's cost; bench/backup measures what is left).
    os.nice(BACKUP_NICENESS)
    try:
        settings = load_settings(config)
        where = sources(settings, config.parent, os.environ.get("STATE_DIRECTORY"), config_file=config)
        written = asyncio.run(run_backup(settings, where, time.time()))
    except ConfigError as exc:
        raise refuse_config(exc) from None
    except BackupError as exc:
        typer.echo(f"llmgw server backup: {exc}", err=True)
        raise typer.Exit(code=2) from None
    typer.echo(str(written.path))
    for target in written.copies:
        typer.echo(f"copied to {target}")
    for name in written.pruned:
        typer.echo(f"removed {name} (beyond backup_keep)")


@app.command("restore")
def restore(
    archive: Path = typer.Argument(..., help="The archive llmgw server backup wrote.", show_default=False),
    config: Path = typer.Option(..., "--config", "-c", help="The server's YAML configuration."),
    identity: Path | None = typer.Option(
        None,
        "--identity",
        "-i",
        help="The age key file (age-keygen's output) or SSH private key of one of backup_recipients.",
        show_default=False,
    ),
) -> None:
    """Put the store and the cluster CA's files back from ARCHIVE.

    Refused while a server answers on the configuration's listen or admin_listen (or,
    on PostgreSQL, any other session uses the database). The archive is decrypted and
    every member checked against its manifest before anything is changed; the
    configuration file is not replaced. Start the server afterwards."""
    from llmgw.backup import restore as run_restore  # noqa: PLC0415 (see the imports)
    from llmgw.backup import sources  # noqa: PLC0415
    from llmgw.backup.crypt import read_identities  # noqa: PLC0415
    from llmgw.errors import BackupError  # noqa: PLC0415

    try:
        settings = load_settings(config)
        where = sources(settings, config.parent, os.environ.get("STATE_DIRECTORY"), config_file=config)
        identities = read_identities(identity) if identity is not None else None
        restored = run_restore(settings, where, archive, identities)
    except ConfigError as exc:
        raise refuse_config(exc) from None
    except (BackupError, StoreError) as exc:
        typer.echo(f"llmgw server restore: {exc}", err=True)
        raise typer.Exit(code=2) from None
    typer.echo(
        f"restored {restored.store} (schema {restored.manifest.schema_revision}) from {archive.name}"
        + "".join(f"; {path}" for path in restored.files)
        + "; start the server now"
    )

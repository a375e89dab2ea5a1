"""`llmgw node add NAME` and `llmgw node remove NAME`: a node's certificate, issued by the
cluster CA `llmgw server init` made, and revoked.

Both run on the control plane's machine, with its configuration: the CA is found from
`agent_tls.ca_file` (its key beside it, ca.key), and every certificate issued or revoked
is recorded in the server's store, where the control plane reads the revoked serials and
refuses a node that shows one.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import typer

from llmgw.cli.startup import refuse_config
from llmgw.config import load_settings
from llmgw.errors import ConfigError, StoreError

app = typer.Typer(
    help="Issue a node's certificate bundle (add) or revoke it (remove), on the control plane's machine.",
    no_args_is_help=True,
)

_CONFIG = typer.Option(
    ..., "--config", "-c", help="The server's YAML configuration (its agent_tls names the CA)."
)


@app.command("add")
def add(
    name: str = typer.Argument(
        ..., help="The node's name: the agent's --node-id (its host name by default)."
    ),
    config: Path = _CONFIG,
    ips: list[str] = typer.Option(
        [], "--ip", help="An address of the node to name in its certificate too.", show_default=False
    ),
    out: Path | None = typer.Option(
        None, "--out", help="The bundle's folder. Default: nodes/NAME beside the CA.", show_default=False
    ),
    force: bool = typer.Option(False, "--force", help="Replace a bundle already in --out."),
) -> None:
    """Issue a certificate for node NAME (valid one year) into a bundle: node.crt, node.key, ca.crt.

    Copy the folder to the node and start its agent with --tls-cert node.crt --tls-key node.key
    --tls-ca ca.crt."""
    import asyncio  # noqa: PLC0415 (the store is imported when used)

    from llmgw.pki import ClusterFiles, check_node_name, issue_bundle  # noqa: PLC0415
    from llmgw.store import Store  # noqa: PLC0415

    try:
        check_node_name(name)
        settings = load_settings(config)
        files = ClusterFiles.from_tls(settings.agent_tls)
        bundle = out or files.ca_cert.parent / "nodes" / name
        location = settings.effective_store(config.parent, os.environ.get("STATE_DIRECTORY"))
        now = datetime.now(UTC)
        prepared = issue_bundle(files, name, ips, bundle, now, force=force)
        issued = prepared.issued

        async def record() -> None:
            store = await Store.open(location)
            try:
                await store.node_certs.issued(
                    issued.serial, name, issued.not_after.timestamp(), now.timestamp()
                )
            finally:
                await store.close()

        asyncio.run(record())
        prepared.write()
    except ConfigError as exc:
        raise refuse_config(exc) from None
    except StoreError as exc:
        typer.echo(
            f"llmgw node add could not record the certificate in the store (auth.store): {exc}", err=True
        )
        raise typer.Exit(code=1) from None
    except OSError as exc:
        typer.echo(f"llmgw node add could not write the bundle: {exc}", err=True)
        raise typer.Exit(code=1) from None
    typer.echo(f"node {name}: certificate serial {issued.serial}, valid until {issued.not_after:%Y-%m-%d}")
    typer.echo(f"bundle: {bundle}/node.crt, node.key, ca.crt (copy it to the node, keep it 0600)")
    typer.echo(
        f"on the node: llmgw agent --server HOST:PORT --node-id {name} --tls-cert node.crt --tls-key node.key"
        " --tls-ca ca.crt"
    )


@app.command("remove")
def remove(
    name: str = typer.Argument(..., help="The node whose certificates are revoked."),
    config: Path = _CONFIG,
) -> None:
    """Revoke every certificate issued to node NAME: the control plane refuses it from then on.

    A node connected now is sent away within control.interval."""
    import asyncio  # noqa: PLC0415 (the store is imported when used)

    from llmgw.store import Store  # noqa: PLC0415

    try:
        settings = load_settings(config)
        location = settings.effective_store(config.parent, os.environ.get("STATE_DIRECTORY"))

        async def revoke() -> list[str]:
            store = await Store.open(location)
            try:
                return await store.node_certs.revoke(name, datetime.now(UTC).timestamp())
            finally:
                await store.close()

        serials = asyncio.run(revoke())
    except ConfigError as exc:
        raise refuse_config(exc) from None
    except StoreError as exc:
        typer.echo(f"llmgw node remove could not reach the store (auth.store): {exc}", err=True)
        raise typer.Exit(code=1) from None
    if not serials:
        typer.echo(
            f"node {name!r} has no certificate to revoke in this server's store: none was issued by"
            " llmgw node add with this --config, or all are revoked already",
            err=True,
        )
        raise typer.Exit(code=2)
    typer.echo(f"node {name}: revoked certificate(s) {', '.join(serials)}")

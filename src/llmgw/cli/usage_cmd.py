"""`llmgw usage [--by project|team|org|user|key|model] [--since 24h]`: who used what,
from the five-minute sums the server keeps, as a table."""

from __future__ import annotations

from pathlib import Path

import typer

from llmgw.cli.admin_client import DEFAULT_ADMIN_URL
from llmgw.cli.tenancy_cmd import call, connect, show

app = typer.Typer(help="Requests, tokens and cost, grouped.", invoke_without_command=True)


@app.callback()
def usage(
    ctx: typer.Context,
    by: str = typer.Option("project", "--by", help="project, team, org, user, key or model."),
    since: str = typer.Option("24h", "--since", help="How far back, like 24h or 30m."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    admin: str = typer.Option(DEFAULT_ADMIN_URL, "--admin", help="The server's admin listener."),
    token: str | None = typer.Option(None, "--token", help="The admin token (else LLMGW_ADMIN_TOKEN)."),
    token_file: Path | None = typer.Option(None, "--token-file", help="A file holding the admin token."),
    config: Path | None = typer.Option(
        None, "--config", help="The server's configuration, to find its token."
    ),
) -> None:
    """Prints usage since SINCE grouped BY one level."""
    connect(ctx, admin, token, token_file, config)
    answer = call(ctx, "GET", "usage", None, by=by, since=since)
    columns = (by, "requests", "errors", "prompt_tokens", "completion_tokens", "cost")
    show(answer["data"], columns, as_json=as_json, title=f"usage by {by}, last {since}")

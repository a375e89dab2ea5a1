"""`llmgw usage [--by project|team|org|user|key|model] [--since 24h]`: who used what,
from the five-minute sums the server keeps, as a table."""

from __future__ import annotations

import typer

from llmgw.cli.connection import call, fail, with_connection
from llmgw.cli.tables import JSON, WIDE, show
from llmgw.cli.values import duration


@with_connection
def usage(
    ctx: typer.Context,
    by: str = typer.Option("project", "--by", help="project, team, org, user, key or model."),
    since: str = typer.Option("24h", "--since", help="How far back, like 30m, 24h or 7d."),
    wide: bool = WIDE,
    as_json: bool = JSON,
) -> None:
    """Requests, tokens and cost since SINCE, grouped BY one level."""
    try:
        window = duration(since, "--since")
    except ValueError as exc:
        raise fail(exc) from None
    answer = call(ctx, "GET", "usage", None, by=by, since=window)
    columns = (by, "requests", "errors", "prompt_tokens", "completion_tokens", "cost")
    show(answer["data"], columns, as_json=as_json, wide=wide, title=f"usage by {by}, last {since}")

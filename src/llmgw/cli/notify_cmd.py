"""`llmgw ctl notify log|test`: the webhook delivery log of a running server, and a test
event sent to one webhook now, through the admin API (`/api/notify`)."""

from __future__ import annotations

import time
from typing import Any

import typer

from llmgw.cli.connection import AdminTyper, call
from llmgw.cli.tables import JSON, WIDE, Column, show

app = AdminTyper(
    help="Webhook notifications (notify.webhooks): the delivery log, and a test event.",
    no_args_is_help=True,
)

_COLUMNS = (
    Column("created", "when"),
    "webhook",
    Column("type", whole=True),
    Column("state", whole=True),
    Column("attempts", "tries"),
    Column("last_status", "status"),
    Column("next", "next try", wide_only=True),
    Column("event_id", "event", whole=True, wide_only=True),
    Column("last_error", "last error"),
)


def _clock(epoch: Any) -> str | None:
    if not isinstance(epoch, int | float):
        return None
    return time.strftime("%m-%d %H:%M:%S", time.localtime(epoch))


@app.command("log")
def log(
    ctx: typer.Context,
    webhook: str | None = typer.Option(
        None, "--webhook", metavar="NAME", help="Only this webhook's deliveries."
    ),
    limit: int = typer.Option(50, "--limit", min=1, max=1000, help="How many, newest first."),
    wide: bool = WIDE,
    as_json: bool = JSON,
) -> None:
    """Deliveries newest first: delivered, pending (and its next try) or failed (given up)."""
    rows = call(ctx, "GET", "notify/deliveries", webhook=webhook, limit=str(limit))["data"]
    if not as_json:
        rows = [{**row, "created": _clock(row["created_at"]), "next": _clock(row["next_at"])} for row in rows]
    show(rows, _COLUMNS, as_json=as_json, wide=wide, title="webhook deliveries")


@app.command("test")
def send_test(ctx: typer.Context, name: str = typer.Argument(..., metavar="NAME")) -> None:
    """Send a signed notify.test event to webhook NAME now and print what it answered."""
    answer = call(ctx, "POST", f"notify/test/{name}")
    if answer["delivered"]:
        typer.echo(f"{name} took the test event: HTTP {answer['status']} {answer['answer']}".rstrip())
        return
    why = answer["error"] or f"HTTP {answer['status']} {answer['answer']}".rstrip()
    typer.echo(f"error: {name} did not take the test event: {why}", err=True)
    raise typer.Exit(code=1)

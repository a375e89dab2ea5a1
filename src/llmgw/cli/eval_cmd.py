"""`llmgw ctl eval MODEL [--suite S] [--concurrency N]`: an evaluation suite run against
a model through the gateway, on the server (its admin API's `POST /api/eval/<model>`).

The server runs the cases through its own request path, so the command needs only the
admin token, with auth on or off. It prints the score, each failed case with its
reason, and the time taken; the exit status is 1 when the score is under the passing
score (the model's eval.min_score, else the suite's own), 2 when the run was refused.
"""

from __future__ import annotations

import urllib.parse
from typing import Annotated, Any

import orjson
import typer

from llmgw.cli.admin_client import AdminError
from llmgw.cli.connection import client, fail

EVAL_TIMEOUT_S = 600.0
"""How long the command waits for the server's run: a suite of large answers is slow."""


def eval_model(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(metavar="MODEL", help="The catalog model to evaluate.")],
    suite: Annotated[
        str | None,
        typer.Option(
            help="The suite: a NAME.jsonl in control.eval_dir, or arithmetic or json-format (llmgw "
            "carries both). Default: the model's eval.suite."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Cases asked of the model at once.")] = 4,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Runs an evaluation suite against MODEL through the gateway and prints its score,
    the cases it failed with why, and the time taken.

    Exits 1 when the score is under the passing score (the model's eval.min_score, else
    the suite's). The last result is kept on the gateway: `llmgw ctl explain MODEL`
    shows it, and a canary candidate under its eval gate gets no requests."""
    body: dict[str, Any] = {"concurrency": concurrency}
    if suite:
        body["suite"] = suite
    try:
        admin = client(ctx)
        admin.timeout_s = EVAL_TIMEOUT_S
        result = admin.call("POST", f"eval/{urllib.parse.quote(model, safe='')}", body)
    except AdminError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(orjson.dumps({k: v for k, v in result.items() if k != "lines"}).decode())
    else:
        for line in result.get("lines") or []:
            typer.echo(line)
    if not result.get("passed_gate"):
        raise typer.Exit(code=1)

"""`llmgw ctl guard attach|detach|list`: guard policies attached to an organisation,
team, project or person, through the admin API. The nearest level with an attachment
adds its policies to `guard.default` for its callers, on every gateway within half of
`auth.cache_ttl`."""

from __future__ import annotations

import typer

from llmgw.cli.connection import AdminTyper, call
from llmgw.cli.tables import JSON, WIDE, show

app = AdminTyper(
    help="Guard policies attached to an org, team, project or user (added to guard.default).",
    no_args_is_help=True,
)

_ORG = typer.Option(None, "--org", help="Attach to this organisation.")
_TEAM = typer.Option(None, "--team", help="Attach to this team.")
_PROJECT = typer.Option(None, "--project", help="Attach to this project.")
_USER = typer.Option(None, "--user", help="Attach to this person (their personal keys).")


def _scope(org: str | None, team: str | None, project: str | None, user: str | None) -> tuple[str, str]:
    given = [(k, v) for k, v in (("org", org), ("team", team), ("project", project), ("user", user)) if v]
    if len(given) != 1:
        typer.echo("error: name exactly one of --org, --team, --project or --user", err=True)
        raise typer.Exit(code=2)
    return given[0]


@app.command("attach")
def attach(
    ctx: typer.Context,
    policy: str = typer.Argument(..., metavar="POLICY"),
    org: str | None = _ORG,
    team: str | None = _TEAM,
    project: str | None = _PROJECT,
    user: str | None = _USER,
) -> None:
    """Attach POLICY (one of guard.policies) to one scope."""
    kind, scope_id = _scope(org, team, project, user)
    call(ctx, "POST", "guard/attachments", {"policy": policy, "scope": kind, "id": scope_id})
    typer.echo(f"attached {policy} to {kind} {scope_id}")


@app.command("detach")
def detach(
    ctx: typer.Context,
    policy: str = typer.Argument(..., metavar="POLICY"),
    org: str | None = _ORG,
    team: str | None = _TEAM,
    project: str | None = _PROJECT,
    user: str | None = _USER,
) -> None:
    """Detach POLICY from one scope."""
    kind, scope_id = _scope(org, team, project, user)
    call(ctx, "DELETE", f"guard/attachments/{kind}/{scope_id}/{policy}")
    typer.echo(f"detached {policy} from {kind} {scope_id}")


@app.command("list")
def list_attachments(ctx: typer.Context, wide: bool = WIDE, as_json: bool = JSON) -> None:
    """Every attachment: scope, id, policy."""
    rows = call(ctx, "GET", "guard/attachments")["data"]
    show(rows, ("scope", "id", "policy"), as_json=as_json, wide=wide, title="guard attachments")

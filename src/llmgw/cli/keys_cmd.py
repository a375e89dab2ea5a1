"""`llmgw keys create|list|revoke|ttl|cache`: API keys, through the admin API.

A key is printed once, when it is made; the server keeps only its hash. Keys belong
to a project (`--project`) or to a person (`--user`), and live at most as long as
`auth.max_key_ttl` and their organisation, team and project allow (`llmgw keys ttl`
sets those bounds).
"""

from __future__ import annotations

import time

import typer

from llmgw.cli.connection import AdminTyper, call, fail
from llmgw.cli.tables import JSON, WIDE, Column, show
from llmgw.cli.values import duration

app = AdminTyper(
    help="Create, list and revoke API keys; bound their lifetime; cache a project's answers.",
    no_args_is_help=True,
)

_COLUMNS = (Column("id", whole=True), "name", "project", "user", "band", "rpm", "tpm", "expires", "state")
_JSON = JSON


def _when(epoch: float | None) -> str | None:
    return None if epoch is None else time.strftime("%Y-%m-%d %H:%M", time.gmtime(epoch)) + "Z"


def _rows(keys: list[dict[str, object]]) -> list[dict[str, object]]:
    out = []
    for key in keys:
        expires = key.get("expires_at")
        out.append({**key, "expires": _when(expires) if isinstance(expires, int | float) else None})
    return out


@app.command("create")
def create(
    ctx: typer.Context,
    project: str | None = typer.Option(None, "--project", help="The project the key belongs to."),
    user: str | None = typer.Option(None, "--user", help="The person a personal key belongs to."),
    name: str = typer.Option("", "--name", help="What the key is for."),
    ttl: str | None = typer.Option(
        None, "--ttl", help="Lifetime, like 30d or 720h; default: the longest allowed."
    ),
    band: str | None = typer.Option(None, "--band", help="Admission band of its requests."),
    rpm: int | None = typer.Option(None, "--rpm", help="Its own requests-a-minute limit."),
    tpm: int | None = typer.Option(None, "--tpm", help="Its own tokens-a-minute limit."),
    wide: bool = WIDE,
    as_json: bool = _JSON,
) -> None:
    """Makes a key and prints it: this is the only time it is shown."""
    try:
        ttl = None if ttl is None else duration(ttl, "--ttl")
    except ValueError as exc:
        raise fail(exc) from None
    body = {"project": project, "user": user, "name": name, "ttl": ttl, "band": band, "rpm": rpm, "tpm": tpm}
    made = call(ctx, "POST", "keys", {k: v for k, v in body.items() if v not in (None, "")})
    if as_json:
        show([made], list(made), as_json=True)
        return
    show(_rows([made]), _COLUMNS, as_json=False, wide=wide)
    typer.echo(f"\n{made['key']}\n")
    typer.echo("Store it now: it is not shown again, and cannot be recovered.", err=True)


@app.command("list")
def list_(
    ctx: typer.Context,
    project: str | None = typer.Option(None, "--project"),
    user: str | None = typer.Option(None, "--user"),
    include_revoked: bool = typer.Option(False, "--all", help="Include revoked keys."),
    wide: bool = WIDE,
    as_json: bool = _JSON,
) -> None:
    """Lists keys by id (their public prefix), never the keys themselves."""
    keys = call(ctx, "GET", "keys", None, project=project, user=user, all="1" if include_revoked else None)
    show(_rows(keys["data"]), _COLUMNS, as_json=as_json, wide=wide, title="keys")


@app.command("revoke")
def revoke(ctx: typer.Context, key_id: str = typer.Argument(..., metavar="ID")) -> None:
    """Revokes a key: refused everywhere within auth.cache_ttl, here at once."""
    call(ctx, "DELETE", f"keys/{key_id}")
    typer.echo(f"revoked key {key_id}")


@app.command("ttl")
def ttl(
    ctx: typer.Context,
    kind: str = typer.Argument(..., metavar="KIND", help="org, team or project."),
    ident: str = typer.Argument(..., metavar="ID"),
    longest: str = typer.Argument(
        ..., metavar="DURATION", help="Longest lifetime of new keys under it, like 30d; 'none' clears."
    ),
) -> None:
    """Bounds the lifetime of keys made under an org, team or project."""
    if kind not in ("org", "team", "project"):
        raise fail(ValueError(f"{kind!r}: key lifetimes are bounded per org, team or project"))
    try:
        value = None if longest.lower() == "none" else duration(longest, "DURATION")
    except ValueError as exc:
        raise fail(exc) from None
    call(ctx, "PUT", f"ttl/{kind}/{ident}", {"max_key_ttl": value})
    typer.echo(f"keys under {kind} {ident} live at most {longest if value else 'as auth.max_key_ttl allows'}")


@app.command("cache")
def cache(
    ctx: typer.Context,
    project: str = typer.Option(..., "--project", help="The project whose answers are cached."),
    ttl: str | None = typer.Option(None, "--ttl", help="How long an answer is kept, like 10m or 1h."),
    off: bool = typer.Option(False, "--off", help="Stop caching the project's answers."),
) -> None:
    """Caches the project's repeatable answers (temperature 0, a seed, embeddings) for --ttl.

    A repeated request from any of the project's keys is then answered from the
    gateway's memory (router.cache bounds it) with x-llmgw-cache: hit, at no token cost.
    --off stops hits once each gateway sees the change (within auth.cache_ttl)."""
    if (ttl is None) == (not off):
        raise fail(ValueError("give --ttl DURATION to cache the project's answers, or --off to stop"))
    try:
        value = None if off or ttl is None else duration(ttl, "--ttl")
    except ValueError as exc:
        raise fail(exc) from None
    call(ctx, "PUT", f"cache/project/{project}", {"ttl": value})
    said = "answers are not cached" if off else f"answers are cached for {ttl}"
    typer.echo(f"project {project}: {said}")

"""`llmgw orgs|teams|projects|users …`: the tenancy tree, through the admin API.

Each command is one call to `/api` on a running server with the admin token (the
connection options of cli.connection); answers print as tables fitted to the terminal
(`--wide`: every value in full; `--json`: JSON).
"""

from __future__ import annotations

from typing import Any

import typer

from llmgw.cli.connection import AdminTyper, call, fail
from llmgw.cli.tables import JSON, WIDE, show
from llmgw.cli.values import duration

_SCOPE_COLUMNS = (
    "id",
    "rpm",
    "tpm",
    "budget",
    "budget_period",
    "allowed_models",
    "band",
    "max_key_ttl",
    "gpu_quota",
)


def _models(text: str | None) -> list[str] | None:
    return None if text is None else [m.strip() for m in text.split(",") if m.strip()]


def _ttl(text: str | None) -> str | None:
    try:
        return None if text is None else duration(text, "--max-key-ttl")
    except ValueError as exc:
        raise fail(exc) from None


def _fields(
    rpm: int | None,
    tpm: int | None,
    budget: float | None,
    period: str | None,
    models: str | None,
    band: str | None,
    max_key_ttl: str | None,
    gpu_quota: int | None = None,
) -> dict[str, Any]:
    given = {
        "rpm": rpm,
        "tpm": tpm,
        "budget": budget,
        "budget_period": period,
        "allowed_models": _models(models),
        "band": band,
        "max_key_ttl": _ttl(max_key_ttl),
        "gpu_quota": gpu_quota,
    }
    return {name: value for name, value in given.items() if value is not None}


_JSON = JSON
_RPM = typer.Option(None, "--rpm", help="Requests a minute (0: explicitly unlimited).")
_TPM = typer.Option(None, "--tpm", help="Tokens a minute (0: explicitly unlimited).")
_BUDGET = typer.Option(None, "--budget", help="Units a period (0: explicitly none).")
_PERIOD = typer.Option(None, "--period", help="Budget period: day or month.")
_MODELS = typer.Option(None, "--models", help="Allowed models, comma-separated (empty: none).")
_BAND = typer.Option(None, "--band", help="Admission band of its keys.")
_TTL = typer.Option(None, "--max-key-ttl", help="Longest lifetime of keys under it, like 30d or 720h.")
_GPU_QUOTA_HELP = "Devices (cards or MIG instances) the models it owns may hold together."
_CLEAR = typer.Option([], "--clear", help="A setting to clear back to inherited (repeatable).")
_IDP_GROUP_HELP = (
    "The identity provider's group (its SCIM displayName, or a name in the sign-in groups claim) "
    "whose members are this team's members; --clear idp_group stops following it."
)


def _no_quota_for_people(kind: str, gpu_quota: int | None) -> None:
    if kind == "user" and gpu_quota is not None:
        raise fail(ValueError("a person owns no models: set --gpu-quota on an org, team or project"))


def scope_app(kind: str, parent: str | None) -> typer.Typer:
    """The commands of one tenancy level."""
    plural = f"{kind}s"
    app = AdminTyper(help=f"Create, list, change and delete {plural}.", no_args_is_help=True)
    columns = ("id", *((parent,) if parent else ()), *_SCOPE_COLUMNS[1:])
    if kind == "team":
        columns = (*columns, "idp_group")
    if kind == "user":
        columns = (
            "id",
            "email",
            "status",
            "disabled",
            "rpm",
            "tpm",
            "budget",
            "budget_period",
            "allowed_models",
            "band",
        )
    # Every level's commands share one signature; what does not apply to a level (a
    # parent for orgs and users, an address for all but users, a GPU quota for users) is
    # kept out of its --help, and refused if given anyway.
    person = kind == "user"
    parent_option = typer.Option(
        None, f"--{parent or 'parent'}", help=f"The {parent} it belongs to.", hidden=parent is None
    )
    email_option = typer.Option(None, "--email", help="The person's address.", hidden=not person)
    quota_option = typer.Option(None, "--gpu-quota", min=0, help=_GPU_QUOTA_HELP, hidden=person)
    team = kind == "team"
    group_option = typer.Option(None, "--idp-group", help=_IDP_GROUP_HELP, hidden=not team)

    def group_only_on_teams(idp_group: str | None) -> None:
        if idp_group is not None and not team:
            raise fail(
                ValueError(
                    f"only teams follow an identity-provider group: leave out --idp-group for {plural}"
                )
            )

    def no_parent(parent_id: str | None) -> None:
        if parent is None and parent_id is not None:
            raise fail(ValueError(f"{plural} belong to no other level: leave out --parent"))

    @app.command("create")
    def create(
        ctx: typer.Context,
        ident: str = typer.Argument(..., metavar="ID", help=f"The {kind}'s name, unique among {plural}."),
        parent_id: str | None = parent_option,
        email: str | None = email_option,
        rpm: int | None = _RPM,
        tpm: int | None = _TPM,
        budget: float | None = _BUDGET,
        period: str | None = _PERIOD,
        models: str | None = _MODELS,
        band: str | None = _BAND,
        max_key_ttl: str | None = _TTL,
        gpu_quota: int | None = quota_option,
        idp_group: str | None = group_option,
        as_json: bool = _JSON,
    ) -> None:
        """Creates it; settings not given are inherited from above, or the defaults."""
        _no_quota_for_people(kind, gpu_quota)
        group_only_on_teams(idp_group)
        no_parent(parent_id)
        if email is not None and not person:
            raise fail(ValueError(f"only users have an address: leave out --email for {plural}"))
        fields = _fields(rpm, tpm, budget, period, models, band, max_key_ttl, gpu_quota)
        body: dict[str, Any] = {"id": ident, **fields}
        if parent:
            if parent_id is None:
                raise fail(ValueError(f"{plural} belong to {parent}s: give --{parent}"))
            body[parent] = parent_id
        if email is not None:
            body["email"] = email
        if idp_group is not None:
            body["idp_group"] = idp_group
        show([call(ctx, "POST", plural, body)], columns, as_json=as_json)

    @app.command("list")
    def list_(
        ctx: typer.Context,
        parent_id: str | None = typer.Option(
            None, f"--{parent or 'parent'}", help=f"Only those in this {parent}.", hidden=parent is None
        ),
        wide: bool = WIDE,
        as_json: bool = _JSON,
    ) -> None:
        """Lists them with their own settings (a dash: inherited)."""
        no_parent(parent_id)
        query = {parent: parent_id} if parent else {}
        rows = call(ctx, "GET", plural, None, **query)["data"]
        show(rows, columns, as_json=as_json, wide=wide, title=plural)

    @app.command("show")
    def show_one(
        ctx: typer.Context,
        ident: str = typer.Argument(..., metavar="ID"),
        wide: bool = WIDE,
        as_json: bool = _JSON,
    ) -> None:
        """Shows one."""
        show([call(ctx, "GET", f"{plural}/{ident}")], columns, as_json=as_json, wide=wide)

    @app.command("set")
    def set_(
        ctx: typer.Context,
        ident: str = typer.Argument(..., metavar="ID"),
        rpm: int | None = _RPM,
        tpm: int | None = _TPM,
        budget: float | None = _BUDGET,
        period: str | None = _PERIOD,
        models: str | None = _MODELS,
        band: str | None = _BAND,
        max_key_ttl: str | None = _TTL,
        gpu_quota: int | None = quota_option,
        idp_group: str | None = group_option,
        clear: list[str] = _CLEAR,
        as_json: bool = _JSON,
    ) -> None:
        """Changes settings; those not given stay, those named by --clear are inherited again
        (a cleared gpu_quota is no quota)."""
        _no_quota_for_people(kind, gpu_quota)
        group_only_on_teams(idp_group)
        body: dict[str, Any] = _fields(rpm, tpm, budget, period, models, band, max_key_ttl, gpu_quota)
        if idp_group is not None:
            body["idp_group"] = idp_group
        body.update(dict.fromkeys(clear))
        if not body:
            raise fail(ValueError("nothing to change: give a setting, or --clear one"))
        show([call(ctx, "PATCH", f"{plural}/{ident}", body)], columns, as_json=as_json)

    @app.command("delete")
    def delete(ctx: typer.Context, ident: str = typer.Argument(..., metavar="ID")) -> None:
        """Deletes it; refused while anything still belongs to it."""
        call(ctx, "DELETE", f"{plural}/{ident}")
        typer.echo(f"deleted {kind} {ident}")

    if kind == "user":
        _membership_commands(app)
        _signup_commands(app)
        _role_commands(app)
    return app


_ROLE_SCOPES = {
    "org": typer.Option(None, "--org", help="The organisation the role is held in."),
    "team": typer.Option(None, "--team", help="The team the role is held in."),
    "project": typer.Option(None, "--project", help="The project the role is held in."),
}


def _role_scope(org: str | None, team: str | None, project: str | None) -> tuple[str, str]:
    given = [(kind, ident) for kind, ident in (("org", org), ("team", team), ("project", project)) if ident]
    if len(given) != 1:
        raise fail(ValueError("a role is held in one place: give exactly one of --org, --team and --project"))
    return given[0]


def _role_commands(app: typer.Typer) -> None:
    @app.command("grant")
    def grant(
        ctx: typer.Context,
        user: str = typer.Argument(..., metavar="USER"),
        org: str | None = _ROLE_SCOPES["org"],
        team: str | None = _ROLE_SCOPES["team"],
        project: str | None = _ROLE_SCOPES["project"],
        role: str = typer.Option(
            ..., "--role", help="admin (manages what is under it, and its keys) or member (sees it)."
        ),
    ) -> None:
        """Makes USER admin or member of one org, team or project (docs/identity.md, Roles);
        their sessions see it within auth.cache_ttl."""
        if role not in ("admin", "member"):
            raise fail(ValueError(f"--role {role!r} is not a role: use admin or member"))
        kind, ident = _role_scope(org, team, project)
        call(ctx, "PUT", f"users/{user}/roles/{kind}/{ident}", {"role": role})
        typer.echo(f"{user} is {role} of {kind} {ident}")

    @app.command("revoke")
    def revoke(
        ctx: typer.Context,
        user: str = typer.Argument(..., metavar="USER"),
        org: str | None = _ROLE_SCOPES["org"],
        team: str | None = _ROLE_SCOPES["team"],
        project: str | None = _ROLE_SCOPES["project"],
    ) -> None:
        """Ends USER's role in one org, team or project."""
        kind, ident = _role_scope(org, team, project)
        call(ctx, "DELETE", f"users/{user}/roles/{kind}/{ident}")
        typer.echo(f"{user} holds no role in {kind} {ident} now")


def _signup_commands(app: typer.Typer) -> None:
    @app.command("approve")
    def approve(ctx: typer.Context, ident: str = typer.Argument(..., metavar="ID")) -> None:
        """Lets a person whose signup is pending in: they can use llmgw at their next
        request (sessions held already see it within auth.cache_ttl)."""
        answer = call(ctx, "POST", f"users/{ident}/approve")
        typer.echo(f"{answer['id']} is {answer['status']}")

    @app.command("reject")
    def reject(ctx: typer.Context, ident: str = typer.Argument(..., metavar="ID")) -> None:
        """Turns a person's signup down: their sessions end and their sign-ins are refused."""
        answer = call(ctx, "POST", f"users/{ident}/reject")
        typer.echo(f"{answer['id']} is {answer['status']}")


def _membership_commands(app: typer.Typer) -> None:
    @app.command("join")
    def join(
        ctx: typer.Context,
        user: str = typer.Argument(...),
        project: str = typer.Argument(...),
        role: str = typer.Option("member", "--role", help="member or admin."),
    ) -> None:
        """Makes USER a member of PROJECT."""
        call(ctx, "POST", "memberships", {"user": user, "project": project, "role": role})
        typer.echo(f"{user} is a {role} of {project}")

    @app.command("leave")
    def leave(
        ctx: typer.Context, user: str = typer.Argument(...), project: str = typer.Argument(...)
    ) -> None:
        """Ends USER's membership of PROJECT."""
        call(ctx, "DELETE", f"memberships/{user}/{project}")
        typer.echo(f"{user} left {project}")

    @app.command("members")
    def members(
        ctx: typer.Context,
        project: str | None = typer.Option(None, "--project"),
        user: str | None = typer.Option(None, "--user"),
        as_json: bool = _JSON,
    ) -> None:
        """Lists memberships."""
        rows = call(ctx, "GET", "memberships", project=project, user=user)["data"]
        show(rows, ("user", "project", "role"), as_json=as_json, title="memberships")


orgs_app = scope_app("org", None)
teams_app = scope_app("team", "org")
projects_app = scope_app("project", "team")
users_app = scope_app("user", None)

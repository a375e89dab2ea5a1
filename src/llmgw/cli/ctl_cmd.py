"""`llmgw ctl …`: the control plane of a running server, through its admin API.

    llmgw ctl models | nodes | replicas | leader
    llmgw ctl explain MODEL
    llmgw ctl eval MODEL [--suite S] [--concurrency N]
    llmgw ctl model add FILE | edit NAME FILE | remove NAME | scale NAME --min N --max M
    llmgw ctl model canary-reset NAME
    llmgw ctl model update NAME --source NEW [--revision R] [--percent P]
    llmgw ctl model promote NAME | rollback NAME
    llmgw ctl guard attach POLICY --project P | detach POLICY --project P | list
    llmgw ctl notify log [--webhook NAME] [--limit N] | test NAME

Model changes are kept in the server's store, laid over its configuration's `models:`,
and checked by the same rules as the configuration before anything is kept: a refused
definition prints the catalog's sentence naming the field, and exits with status 2.
"""

from __future__ import annotations

import getpass
import socket
import time
import urllib.parse
from pathlib import Path
from typing import Any

import typer

from llmgw.cli import eval_cmd, guard_cmd, notify_cmd
from llmgw.cli.admin_client import AdminError
from llmgw.cli.connection import AdminTyper, call, client, fail
from llmgw.cli.tables import JSON, WIDE, Column, show

app = AdminTyper(
    help="The control plane: models, nodes, replicas, placement reasons, the leader.",
    no_args_is_help=True,
)
model_app = AdminTyper(
    help="Add, edit, remove or scale a model in the runtime catalog; update, promote or roll back "
    "its weights; reset its canary.",
    no_args_is_help=True,
)
app.add_typer(model_app, name="model")
app.add_typer(guard_cmd.app, name="guard")
app.add_typer(notify_cmd.app, name="notify")
app.command("eval")(eval_cmd.eval_model)

_JSON = JSON
# Who changed a model and when is for --wide: with it, ten columns do not fit in 80.
_MODEL_COLUMNS = (
    "name",
    "origin",
    "class",
    "min",
    "max",
    "live",
    "ready",
    "replicas",
    Column("updated", wide_only=True),
    Column("updated_by", wide_only=True),
)
_NODE_COLUMNS = (
    "id",
    "status",
    "hostname",
    "gpus",
    "cpu_cores",
    Column("memory_gb", "memory GB"),
    Column("disk_free_gb", "disk free GB"),
    "labels",
    Column("cert_expires", "cert expires"),
)


def _path(name: str) -> str:
    """A model name as a path segment: names may hold slashes (org/model)."""
    return urllib.parse.quote(name, safe="/")


def _actor() -> str:
    """Who a change is recorded as made by: this user on this machine."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _when(epoch: Any) -> str | None:
    if not isinstance(epoch, int | float):
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch)) + "Z"


def _day(epoch: Any) -> str:
    if not isinstance(epoch, int | float):
        return "-"
    return time.strftime("%Y-%m-%d", time.gmtime(epoch))


def _counts(mapping: Any) -> str:
    if not isinstance(mapping, dict) or not mapping:
        return "-"
    return ", ".join(f"{value} {key}" for key, value in mapping.items())


@app.command("models")
def models(ctx: typer.Context, wide: bool = WIDE, as_json: bool = _JSON) -> None:
    """Lists the catalog in force: each model's origin, min, max and replicas by phase
    (--wide: also when it was last changed, and by whom)."""
    rows = call(ctx, "GET", "control/models")["data"]
    for row in rows:
        row["replicas"] = _counts(row.get("phases"))
        row["updated"] = _when(row.get("updated_at"))
    show(rows, _MODEL_COLUMNS, as_json=as_json, wide=wide, title="models")


@app.command("nodes")
def nodes(ctx: typer.Context, wide: bool = WIDE, as_json: bool = _JSON) -> None:
    """Lists registered nodes: status, what they have, and when each one's certificate ends.

    The certificate's end is the one the node showed when it connected (UTC; - without TLS)."""
    rows = call(ctx, "GET", "control/nodes")["data"]
    if not as_json:
        for row in rows:
            row["cert_expires"] = _day(row.get("cert_not_after"))
            row["gpus"] = _counts(row.get("gpus"))
            row["labels"] = ", ".join(f"{k}={v}" for k, v in (row.get("labels") or {}).items()) or "-"
    show(rows, _NODE_COLUMNS, as_json=as_json, wide=wide, title="nodes")


@app.command("replicas")
def replicas(ctx: typer.Context, wide: bool = WIDE, as_json: bool = _JSON) -> None:
    """Lists replicas: model, profile, phase, since when, on which nodes, and how the
    gateway's routing sees each: its breaker (closed, open, half_open) and last error.
    A server without a control plane lists the gateway's static endpoints."""
    rows, no_control = _optional(ctx, "control/replicas")
    routed, no_router = _optional(ctx, "router/replicas")
    if no_control is not None and no_router is not None:
        raise fail(no_router)  # neither is served there: say why rather than list nothing
    routing = {row["id"]: row for row in routed}
    for row in rows:
        state = routing.pop(row["id"], None)
        row["routing"] = None if state is None else state.get("breaker")
        row["failures"] = None if state is None else state.get("consecutive_failures")
        row["last_error"] = None if state is None else state.get("last_error")
        row["last_error_at"] = None if state is None else state.get("last_error_at")
    for eid, state in routing.items():  # routed to, but not placed by the control plane
        rows.append(
            {
                "id": eid,
                "model": ",".join(state.get("models") or []),
                "phase": "static",
                "routing": state.get("breaker"),
                "failures": state.get("consecutive_failures"),
                "last_error": state.get("last_error"),
                "last_error_at": state.get("last_error_at"),
            }
        )
    if not as_json:
        for row in rows:
            row["since"] = _when(row.get("since"))
            if row.get("last_error"):
                row["last_error"] = f"{row['last_error']} ({_when(row.get('last_error_at'))})"
    columns = ("id", "model", "profile", "phase", "since", "nodes", "routing", "failures", "last_error")
    show(rows, columns, as_json=as_json, wide=wide, title="replicas")


def _optional(ctx: typer.Context, path: str) -> tuple[list[dict[str, Any]], AdminError | None]:
    """A listing the server may not have (no control plane; an older server without
    the router's view): empty with the 404 then; any other refusal ends the command."""
    try:
        rows: list[dict[str, Any]] = client(ctx).call("GET", path)["data"]
    except AdminError as exc:
        if exc.status == 404:
            return [], exc
        raise fail(exc) from None
    return rows, None


def _lines(ctx: typer.Context, path: str) -> tuple[list[str] | None, AdminError | None]:
    """An answer's `lines`, or the 404 of a server (or model) that has none there."""
    try:
        answer = client(ctx).call("GET", path)
    except AdminError as exc:
        if exc.status == 404:
            return None, exc
        raise fail(exc) from None
    return list(answer.get("lines") or []), None


@app.command("explain")
def explain(ctx: typer.Context, model: str = typer.Argument(..., metavar="MODEL")) -> None:
    """Says why MODEL runs where it does, or why it does not run; with a canary, its
    split, both sides' figures and any automatic rollback with its reasons; the last
    eval result on this gateway."""
    placed, no_control = _lines(ctx, f"control/models/{_path(model)}/explain")
    canary, _ = _lines(ctx, f"router/canaries/{_path(model)}")
    evaluated, _ = _lines(ctx, f"eval/{_path(model)}")
    if placed is None and canary is None and evaluated is None and no_control is not None:
        raise fail(no_control)
    if placed is not None:
        for line in placed or ["the control plane has nothing to say about it yet"]:
            typer.echo(line)
    for line in canary or []:
        typer.echo(line)
    for line in evaluated or []:
        typer.echo(line)


@app.command("leader")
def leader(ctx: typer.Context, wide: bool = WIDE, as_json: bool = _JSON) -> None:
    """Shows which server holds the leader lease, its term, and when the lease lapses."""
    answer = call(ctx, "GET", "control/leader")
    if as_json:
        show([answer], list(answer), as_json=True)
        return
    rows = [
        {"field": "holder", "value": answer.get("holder") or "(nobody yet)"},
        {"field": "term", "value": answer.get("term")},
        {"field": "held", "value": answer.get("held")},
        {"field": "expires", "value": _when(answer.get("expires_at"))},
        {"field": "expires in (s)", "value": answer.get("expires_in_s")},
        {"field": "this server", "value": answer.get("this_server")},
        {"field": "this server leads", "value": answer.get("this_server_leads")},
    ]
    show(rows, ("field", "value"), as_json=False, wide=wide, title="leader lease")


def _definition(path: Path) -> bytes:
    """The file's bytes; a file that cannot be read ends the command with why."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        problem = "no such file; give the path of the model's definition (YAML or JSON)"
    except IsADirectoryError:
        problem = "is a directory; give the model's definition file inside it"
    except OSError as exc:
        problem = f"cannot be read: {exc.strerror or exc}"
    else:
        if data.strip():
            return data
        problem = "is empty; write the model's definition in it (name:, source:, profiles:…)"
    raise fail(ValueError(f"{path}: {problem}"))


def _send(ctx: typer.Context, method: str, path: str, definition: bytes) -> Any:
    """A call whose body is a definition file's bytes, passed on as written."""
    try:
        return client(ctx).call(method, path, definition, by=_actor())
    except AdminError as exc:
        raise fail(exc) from None


def _report(answer: dict[str, Any]) -> None:
    model = answer.get("model")
    if isinstance(model, dict):
        typer.echo(f"{answer['result']} model {answer['name']}: min {model['min']}, max {model['max']}")
    else:
        typer.echo(f"{answer['result']} model {answer['name']}")


_FILE = typer.Argument(..., metavar="FILE", help="The model's definition, YAML or JSON.")


@model_app.command("add")
def add(ctx: typer.Context, file: Path = _FILE) -> None:
    """Adds the model defined in FILE (one model, as under `models:` in the configuration)."""
    _report(_send(ctx, "POST", "control/models", _definition(file)))


@model_app.command("edit")
def edit(ctx: typer.Context, name: str = typer.Argument(..., metavar="NAME"), file: Path = _FILE) -> None:
    """Replaces NAME's whole definition with FILE's (its name must stay NAME)."""
    _report(_send(ctx, "PUT", f"control/models/{_path(name)}", _definition(file)))


@model_app.command("remove")
def remove(ctx: typer.Context, name: str = typer.Argument(..., metavar="NAME")) -> None:
    """Removes NAME from the catalog; its replicas are stopped."""
    _report(call(ctx, "DELETE", f"control/models/{_path(name)}", by=_actor()))


@model_app.command("canary-reset")
def canary_reset(ctx: typer.Context, name: str = typer.Argument(..., metavar="NAME")) -> None:
    """Gives NAME's canary candidate its split again after an automatic rollback, judged
    afresh from an empty window (on the gateway this admin API belongs to)."""
    answer = call(ctx, "POST", f"router/canaries/{_path(name)}/reset")
    typer.echo(
        f"canary of model {answer['model']}: {answer['candidate']} gets {answer['percent_in_force']}% "
        "of its requests again"
    )


@model_app.command("scale")
def scale(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME"),
    minimum: int = typer.Option(..., "--min", help="Replicas kept running (0: none kept)."),
    maximum: int = typer.Option(..., "--max", help="Most replicas load may bring (0 with --min 0: off)."),
) -> None:
    """Sets NAME's scaling.min and scaling.max."""
    _report(
        call(
            ctx, "POST", f"control/models/{_path(name)}/scale", {"min": minimum, "max": maximum}, by=_actor()
        )
    )


@model_app.command("update")
def update(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME"),
    source: str = typer.Option(..., "--source", help="The new weights: a mirror path or a Hugging Face id."),
    revision: str = typer.Option("", "--revision", help="The registry commit of the new weights."),
    percent: int = typer.Option(10, "--percent", help="NAME's requests the candidate gets, 0 to 100 (%)."),
) -> None:
    """Starts new weights as NAME's canary, NAME@candidate.

    NAME@candidate is NAME's definition at --source; it gets --percent of NAME's requests.
    Run `llmgw ctl eval NAME@candidate` where NAME has an eval gate, then `promote`."""
    body = {"source": source, "revision": revision, "percent": percent}
    answer = call(ctx, "POST", f"control/models/{_path(name)}/update", body, by=_actor())
    typer.echo(f"updated model {answer['name']}: {name}@candidate at {source} gets {percent}% of requests")


@model_app.command("promote")
def promote(ctx: typer.Context, name: str = typer.Argument(..., metavar="NAME")) -> None:
    """Makes NAME's candidate the model; the old source is kept for `rollback`.

    NAME serves the candidate's source from now on, the old one is kept in origin.previous,
    and the candidate and its canary go. Refused while the candidate's eval gate has no
    passing result."""
    answer = call(ctx, "POST", f"control/models/{_path(name)}/promote", by=_actor())
    typer.echo(f"promoted model {answer['name']}: serves {answer['model']['source']}")


@model_app.command("rollback")
def rollback(ctx: typer.Context, name: str = typer.Argument(..., metavar="NAME")) -> None:
    """Takes NAME back to its origin.previous, the source before the last promote."""
    answer = call(ctx, "POST", f"control/models/{_path(name)}/rollback", by=_actor())
    typer.echo(f"rolled back model {answer['name']}: serves {answer['model']['source']}")

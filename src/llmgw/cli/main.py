"""The `llmgw` command's entry point: one typer application with a sub-command per role.

Errors a user can cause (a bad file, a bad flag) end as one sentence on stderr and exit
status 2; a traceback is reserved for llmgw's own bugs.
"""

from __future__ import annotations

import typer

from llmgw import __version__
from llmgw.cli import (
    agent_cmd,
    config_cmd,
    ctl_cmd,
    firewall_cmd,
    keys_cmd,
    node_cmd,
    server_cmd,
    sim_cmd,
    tenancy_cmd,
    usage_cmd,
    wipe_cmd,
)

app = typer.Typer(
    name="llmgw",
    help="Serve open models on your own machines through one OpenAI-compatible endpoint.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
# Two panels in --help: what runs on a machine, and what talks to a running server.
_RUN, _OPERATE = "Run", "Operate a running server (its admin API)"
app.add_typer(server_cmd.app, name="server", rich_help_panel=_RUN)
app.command("sim-engine", rich_help_panel=_RUN)(sim_cmd.sim_engine)
app.command("agent", rich_help_panel=_RUN)(agent_cmd.agent)
app.add_typer(node_cmd.app, name="node", rich_help_panel=_RUN)
app.command("usage", rich_help_panel=_OPERATE)(usage_cmd.usage)
app.add_typer(config_cmd.app, name="config", rich_help_panel=_RUN)
app.add_typer(firewall_cmd.app, name="firewall", rich_help_panel=_RUN)
app.command("wipe", rich_help_panel=_RUN)(wipe_cmd.wipe)
app.add_typer(tenancy_cmd.orgs_app, name="orgs", rich_help_panel=_OPERATE)
app.add_typer(tenancy_cmd.teams_app, name="teams", rich_help_panel=_OPERATE)
app.add_typer(tenancy_cmd.projects_app, name="projects", rich_help_panel=_OPERATE)
app.add_typer(tenancy_cmd.users_app, name="users", rich_help_panel=_OPERATE)
app.add_typer(keys_cmd.app, name="keys", rich_help_panel=_OPERATE)
app.add_typer(ctl_cmd.app, name="ctl", rich_help_panel=_OPERATE)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"llmgw {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print llmgw's version and exit."
    ),
) -> None:
    """Serve open models on your own machines through one OpenAI-compatible endpoint."""


def run() -> None:
    """Console-script entry point."""
    app()

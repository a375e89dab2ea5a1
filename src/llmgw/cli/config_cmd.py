"""`llmgw config check|show`: load a configuration the way the server would, and say
what is wrong with it or what it amounts to.

Both also name, on stderr, each setting in use that this build does nothing with
(`llmgw.config.inert`); with `--strict`, `check` refuses the file for them."""

from __future__ import annotations

from pathlib import Path

import typer

from llmgw.cli.startup import STRICT_HELP, inert_warnings
from llmgw.config import load_settings, render_effective
from llmgw.errors import ConfigError
from llmgw.guard.describe import describe

app = typer.Typer(help="Check a configuration file, or show what it amounts to.", no_args_is_help=True)


def _fail(error: ConfigError) -> typer.Exit:
    for problem in error.problems:
        typer.echo(problem, err=True)
    return typer.Exit(code=2)


@app.command("check")
def check(
    file: Path = typer.Argument(..., help="The YAML configuration to check.", show_default=False),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
) -> None:
    """Load FILE with the environment's LLMGW_ overrides; print `ok: N models`, or each problem.

    A setting in use that this version does not act on is a warning line on stderr."""
    try:
        settings = load_settings(file)
        inert_warnings(settings, strict=strict)
    except ConfigError as exc:
        raise _fail(exc) from None
    typer.echo(f"ok: {len(settings.catalog().models())} models")


@app.command("show")
def show(
    file: Path | None = typer.Argument(
        None, help="The YAML configuration; without it, the embedded defaults.", show_default=False
    ),
) -> None:
    """Print the effective configuration: defaults filled in, environment applied, models
    normalised; then, as comments, what each guard policy does."""
    try:
        settings = load_settings(file)
    except ConfigError as exc:
        raise _fail(exc) from None
    try:
        inert_warnings(settings, strict=False)
    except ConfigError as exc:  # shown all the same: the file is what the operator asked to see
        for problem in exc.problems:
            typer.echo(f"warning: a server would not start: {problem}", err=True)
    typer.echo(render_effective(settings), nl=False)
    typer.echo("\n".join(describe(settings.guard)))

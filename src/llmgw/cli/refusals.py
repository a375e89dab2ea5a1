"""How a command that cannot start says so: every problem on stderr, one a line, and
the exit status that tells a script whether to fix its input (2) or its machine (1)."""

from __future__ import annotations

import typer

from llmgw.errors import ConfigError


def refuse_config(exc: ConfigError) -> typer.Exit:
    """Prints each configuration problem; the Exit (status 2) to raise."""
    for problem in exc.problems:
        typer.echo(problem, err=True)
    return typer.Exit(code=2)


def cannot_start(command: str, exc: OSError) -> typer.Exit:
    """Prints why the machine refused (a port in use, a missing file); Exit status 1."""
    typer.echo(f"llmgw {command} could not start: {exc.strerror or exc}", err=True)
    return typer.Exit(code=1)

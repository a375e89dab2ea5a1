"""What the long-running commands (server, agent) do as they start: set up logging from
`--log-level`, and say why they cannot start — every problem on stderr, one a line, with
the exit status that tells a script whether to fix its input (2) or its machine (1)."""

from __future__ import annotations

import logging

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


def configure_logging(log_level: str) -> None:
    """Logging at `--log-level`; an unknown level is refused (exit status 2)."""
    level = getattr(logging, log_level.upper(), None)
    if not isinstance(level, int):
        typer.echo(f"--log-level {log_level!r} is not one of debug, info, warning, error", err=True)
        raise typer.Exit(code=2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

"""What the long-running commands (server, agent) do as they start: set up logging from
`--log-level`, and say why they cannot start — every problem on stderr, one a line, with
the exit status that tells a script whether to fix its input (2) or its machine (1)."""

from __future__ import annotations

import logging

import typer

from llmgw.config import Settings
from llmgw.config.inert import inert_in_use
from llmgw.config.rules import start_problems
from llmgw.errors import ConfigError

STRICT_HELP = "Refuse the configuration (exit status 2) if it uses a setting this version does not act on."


def refuse_config(exc: ConfigError) -> typer.Exit:
    """Prints each configuration problem; the Exit (status 2) to raise."""
    for problem in exc.problems:
        typer.echo(problem, err=True)
    return typer.Exit(code=2)


def inert_warnings(settings: Settings, *, strict: bool) -> None:
    """Raises a ConfigError for what would stop a server on `settings` (`start_problems`);
    then prints one `warning:` line on stderr per setting in use that this version does
    nothing with, or with `strict` raises them as a ConfigError instead."""
    cannot = start_problems(settings)
    if cannot:
        raise ConfigError(cannot)
    found = inert_in_use(settings)
    if strict and found:
        raise ConfigError([f"{f} (refused by --strict)" for f in found])
    for f in found:
        typer.echo(f"warning: {f}", err=True)


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

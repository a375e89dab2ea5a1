"""What the long-running commands (server, agent) do as they start: set up logging from
`--log-level` and `--log-format`, and say why they cannot start — every problem on stderr, one a line, with
the exit status that tells a script whether to fix its input (2) or its machine (1)."""

from __future__ import annotations

import logging

import typer

from llmgw.config import Settings
from llmgw.config.inert import inert_in_use
from llmgw.config.observability import LOG_FORMATS
from llmgw.config.rules import start_problems
from llmgw.errors import ConfigError

STRICT_HELP = "Refuse the configuration (exit status 2) if it uses a setting this version does not act on."
LOG_LEVEL_HELP = "debug, info, warning or error."
LOG_FORMAT_HELP = (
    "text (for a person) or json (one object a line, for a log pipeline); each line of a request "
    "carries its request id, and its trace id when traced."
)


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


def log_level_number(log_level: str) -> int:
    """The logging level `--log-level` names; an unknown one is refused (exit status 2)."""
    level = getattr(logging, log_level.upper(), None)
    if not isinstance(level, int):
        typer.echo(f"--log-level {log_level!r} is not one of debug, info, warning, error", err=True)
        raise typer.Exit(code=2)
    return level


def checked_log_format(log_format: str | None) -> str | None:
    """`--log-format` when it names a format (or was not given); refused otherwise
    (exit status 2), before anything starts."""
    if log_format is not None and log_format not in LOG_FORMATS:
        typer.echo(f"--log-format {log_format!r} is not one of text, json", err=True)
        raise typer.Exit(code=2)
    return log_format


def configure_logging(log_level: str, log_format: str = "text") -> None:
    """Every logger's lines at `--log-level` and above on stderr, in `log_format` (text
    or json, llmgw.obs.logs); an unknown level or format is refused (exit status 2)."""
    from llmgw.obs.logs import install  # noqa: PLC0415 (loaded by the commands that log only)

    level = log_level_number(log_level)
    install(level, checked_log_format(log_format) or "text")

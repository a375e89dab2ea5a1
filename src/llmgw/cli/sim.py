"""`python -m llmgw.cli.sim`: the `llmgw sim-engine` command on its own.

Used by tests and benchmarks to start sims as subprocesses without importing the whole
`llmgw` command (and so without the server's configuration modules).
"""

import typer

from llmgw.cli.sim_cmd import sim_engine


def main() -> None:
    """Run `sim_engine` as a one-command typer application."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(context_settings={"help_option_names": ["-h", "--help"]})(sim_engine)
    app(prog_name="llmgw sim-engine")


if __name__ == "__main__":
    main()

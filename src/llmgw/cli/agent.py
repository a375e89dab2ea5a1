"""`python -m llmgw.cli.agent`: the `llmgw agent` command on its own.

The same command as `llmgw agent`, without importing every other command of `llmgw`
(the server, the store, the operator's tools): an agent on a small machine, and the
tests that start many agents, start in half the time.
"""

import typer

from llmgw.cli.agent_cmd import agent


def main() -> None:
    """Run `agent` as a one-command typer application."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(context_settings={"help_option_names": ["-h", "--help"]})(agent)
    app(prog_name="llmgw agent")


if __name__ == "__main__":
    main()

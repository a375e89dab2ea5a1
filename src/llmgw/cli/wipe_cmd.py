"""`llmgw wipe`: remove what llmgw installed on this machine.

It lists what goes first, then asks for the machine's name (or takes it from
`--yes-i-mean NAME`, for scripts), and only then removes, in this order: the systemd
units llmgw installed (the firewall sync's, disabled first), the agent and the engines
it started (by the PIDs llmgw recorded, never by name), llmgw's nft table (`inet
llmgw`; the host's other tables stay), and the directories (the agent's state,
/etc/llmgw and /var/lib/llmgw unless --dir names others). Run it as root.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import typer

from llmgw.errors import FirewallError

DEFAULT_DIRS = (Path("/etc/llmgw"), Path("/var/lib/llmgw"))
DEFAULT_AGENT_STATE = Path("/var/lib/llmgw/agent")


def _fail(message: str) -> typer.Exit:
    typer.echo(f"llmgw wipe: {message}", err=True)
    return typer.Exit(code=2)


def wipe(
    yes_i_mean: str = typer.Option(
        "", "--yes-i-mean", metavar="NAME", help="This machine's name: confirms without asking (for scripts)."
    ),
    dirs: list[Path] = typer.Option(
        [],
        "--dir",
        help="A directory llmgw wrote, removed whole (repeatable). Default: /etc/llmgw, /var/lib/llmgw.",
    ),
    agent_state: Path = typer.Option(
        DEFAULT_AGENT_STATE, "--agent-state-dir", help="The agent's state: its lock and its engines' records."
    ),
    nft: str = typer.Option("nft", "--nft", help="The nft program."),
    units_dir: Path = typer.Option(
        Path("/etc/systemd/system"), "--units-dir", help="Where llmgw's systemd units were installed."
    ),
) -> None:
    """Remove llmgw from this machine: its processes, units, nft table and directories."""
    from llmgw.agent.leftovers import recorded_processes, stop  # noqa: PLC0415 (every command loads this)
    from llmgw.agent.nft import Nft  # noqa: PLC0415
    from llmgw.cli.firewall_units import PATH_UNIT, SERVICE_UNIT  # noqa: PLC0415

    machine = socket.gethostname()
    firewall = Nft((nft,))
    try:
        table = firewall.table() is not None
    except FirewallError as exc:
        typer.echo(f"nft table: not looked at ({exc})")
        table = False
    processes = recorded_processes(agent_state)
    units = [units_dir / name for name in (PATH_UNIT, SERVICE_UNIT) if (units_dir / name).exists()]
    paths = [p for p in dict.fromkeys([*units, agent_state, *(dirs or DEFAULT_DIRS)]) if p.exists()]
    if not (table or processes or paths):
        typer.echo(f"llmgw wipe: nothing of llmgw's is on {machine}")
        return
    typer.echo(f"This removes from {machine}:")
    for process in processes:
        typer.echo(f"  process {process.pid}: {process.what}")
    if table:
        typer.echo("  nft table inet llmgw")
    for path in paths:
        typer.echo(f"  {path}")
    answer = yes_i_mean or typer.prompt(f"Type this machine's name ({machine}) to go ahead", default="")
    if answer != machine:
        raise _fail(f"{answer!r} is not this machine's name ({machine}): nothing was removed")
    if units:
        _disable(units_dir, PATH_UNIT)
    for process in processes:
        gone = stop(process)
        typer.echo(f"{'stopped' if gone else 'still running'}: {process.pid} ({process.what})")
    if table:
        try:
            firewall.remove()
        except FirewallError as exc:
            raise _fail(f"{exc}; the processes are stopped, the directories kept") from None
        typer.echo("removed: nft table inet llmgw")
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        typer.echo(f"removed: {path}")


def _disable(units_dir: Path, unit: str) -> None:
    """Stops the unit watching the firewall state, where systemd runs it, so removing
    the files leaves no unit behind; nothing where systemctl is absent."""
    systemctl = shutil.which("systemctl")
    if systemctl is None or units_dir != Path("/etc/systemd/system"):
        return
    subprocess.run(
        [systemctl, "disable", "--now", unit], capture_output=True, text=True, timeout=60, check=False
    )

"""`llmgw firewall sync`: make llmgw's nft table on this machine what the cluster says,
now.

The state comes from the file a control plane writes for its own machine
(`/var/lib/llmgw/firewall.json`: the `firewall` message agents are sent, as JSON), or
from a configuration file (`--config`: `firewall.enabled`, `firewall_networks` and
`control.port_range`). Either way it is applied in one `nft -f` transaction that
replaces the `inet llmgw` table and touches no other table. Needs root, as nft does.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pydantic
import typer

from llmgw.cli.startup import refuse_config
from llmgw.errors import ConfigError, FirewallError

if TYPE_CHECKING:
    from llmgw.protocol.messages import Firewall

DEFAULT_STATE = Path("/var/lib/llmgw/firewall.json")

app = typer.Typer(
    help="llmgw's nftables table on this machine.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"llmgw firewall sync: {message}", err=True)
    return typer.Exit(code=2)


@app.command("sync")
def sync(
    config: Path | None = typer.Option(
        None, "--config", "-c", help="Take the state from this configuration file instead of --state."
    ),
    state: Path = typer.Option(
        DEFAULT_STATE, "--state", help="The state file the control plane writes for this machine."
    ),
    nft: str = typer.Option("nft", "--nft", help="The nft program."),
    install: bool = typer.Option(
        False, "--install", help="Also install systemd units that sync whenever --state changes."
    ),
    units_dir: Path = typer.Option(
        Path("/etc/systemd/system"), "--units-dir", help="Where --install writes the units."
    ),
) -> None:
    """Apply llmgw's firewall state to this machine now: install, replace or remove its nft table."""
    from llmgw.agent.nft import Nft  # noqa: PLC0415 (every command loads this module)
    from llmgw.agent.node_firewall import NodeFirewall  # noqa: PLC0415
    from llmgw.protocol.messages import Firewall  # noqa: PLC0415

    if install:
        _install(units_dir, state)
        if config is None and not state.exists():
            typer.echo(f"no state at {state} yet: the units apply it once the control plane writes it")
            return
    try:
        if config is not None:
            from llmgw.config import load_settings  # noqa: PLC0415

            settings = load_settings(config)
            message = Firewall(
                enabled=settings.firewall.enabled,
                networks=tuple(str(n) for n in settings.firewall_networks),
                port_range=settings.control.port_range,
            )
            source = str(config)
        else:
            message = read_state(state)
            source = str(state)
        firewall = NodeFirewall(Nft((nft,)))
        wanted = firewall.plan_for(message)
        firewall.apply(message)
    except ConfigError as exc:
        raise refuse_config(exc) from None
    except (FirewallError, ValueError) as exc:
        raise _fail(str(exc)) from None
    if wanted.enabled:
        ports = ", ".join(f"{lo}-{hi}" if lo != hi else str(lo) for lo, hi in wanted.port_ranges)
        allowed = ", ".join(str(n) for n in wanted.allowed) or "loopback only"
        typer.echo(f"firewall (from {source}): table inet llmgw guards ports {ports}; open to {allowed}")
    else:
        typer.echo(f"firewall (from {source}): off; table inet llmgw removed")


def _install(directory: Path, state: Path) -> None:
    """Writes the units; enables the path unit where they went to systemd's own folder."""
    from llmgw.cli.firewall_units import PATH_UNIT, SYSTEM_UNITS, unit_files, write_units  # noqa: PLC0415

    program = shutil.which("llmgw")
    command = [program] if program else [sys.executable, "-m", "llmgw"]
    if not directory.is_dir():
        raise _fail(f"--units-dir {directory} is not a directory: give systemd's unit folder")
    for path in write_units(directory, unit_files(command, state)):
        typer.echo(f"installed: {path}")
    systemctl = shutil.which("systemctl")
    if directory != SYSTEM_UNITS or systemctl is None:
        typer.echo(f"enable it with: systemctl enable --now {PATH_UNIT}")
        return
    for args in (["daemon-reload"], ["enable", "--now", PATH_UNIT]):
        done = subprocess.run([systemctl, *args], capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise _fail(f"systemctl {' '.join(args)} failed: {done.stderr.strip() or done.returncode}")
    typer.echo(f"enabled: {PATH_UNIT}")


def read_state(path: Path) -> Firewall:
    """The state file as a `firewall` message; FirewallError naming the file and the fix."""
    from llmgw.protocol.messages import Firewall  # noqa: PLC0415

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FirewallError(
            f"--state {path} does not exist: start the control plane on this machine, or give --config"
        ) from None
    except OSError as exc:
        raise FirewallError(f"--state {path} cannot be read: {exc.strerror or exc}") from None
    try:
        return Firewall.model_validate_json(text)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise FirewallError(
            f"--state {path}: {where}: {first['msg']}; write it again or give --config"
        ) from None

"""The systemd units that apply a control plane's firewall state as root whenever it
changes: a path unit watching the state file, and the one-shot service it starts
(`llmgw firewall sync`). `llmgw firewall sync --install` writes them."""

from __future__ import annotations

import shlex
from pathlib import Path

PATH_UNIT = "llmgw-firewall-sync.path"
SERVICE_UNIT = "llmgw-firewall-sync.service"
SYSTEM_UNITS = Path("/etc/systemd/system")


def unit_files(command: list[str], state: Path) -> dict[str, str]:
    """File name to text; `command` runs llmgw (`/usr/bin/llmgw`, or python -m llmgw)."""
    argv = [*command, "firewall", "sync", "--state", str(state)]
    return {
        PATH_UNIT: (
            "[Unit]\n"
            "Description=Apply llmgw's firewall state when the control plane changes it\n\n"
            "[Path]\n"
            f"PathChanged={state}\n\n"
            "[Install]\n"
            "WantedBy=multi-user.target\n"
        ),
        SERVICE_UNIT: (
            "[Unit]\n"
            "Description=Apply llmgw's firewall state (the nft table inet llmgw)\n\n"
            "[Service]\n"
            "Type=oneshot\n"
            f"ExecStart={shlex.join(argv)}\n"
        ),
    }


def write_units(directory: Path, files: dict[str, str]) -> list[Path]:
    """Writes the units (0644), replacing any; their paths."""
    written = []
    for name, text in files.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o644)
        written.append(path)
    return written

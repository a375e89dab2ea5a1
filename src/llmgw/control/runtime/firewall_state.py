"""The firewall state file a control plane writes for its own machine.

A control plane runs unprivileged and cannot change nftables itself; it writes what
llmgw's table on its machine should be (the `firewall` message agents are sent, as
JSON) to /var/lib/llmgw/firewall.json, and root applies it with `llmgw firewall sync`
(a systemd path unit that watches the file, or by hand). The file is written only where
its directory exists, i.e. on a machine llmgw was installed on; `LLMGW_FIREWALL_STATE`
names another path.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from llmgw.protocol.messages import Firewall, encode

log = logging.getLogger(__name__)

DEFAULT_PATH = Path("/var/lib/llmgw/firewall.json")
ENV = "LLMGW_FIREWALL_STATE"


def state_path(environ: Mapping[str, str] = os.environ) -> Path:
    return Path(environ.get(ENV) or DEFAULT_PATH)


def write_state(path: Path, message: Firewall) -> bool:
    """Writes `message` to `path` whole (a reader never sees half a file); False, and
    nothing written, where its directory does not exist or refuses the file."""
    if not path.parent.is_dir():
        return False
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        temporary.write_text(encode(message) + "\n", encoding="utf-8")
        temporary.chmod(0o644)
        temporary.replace(path)
    except OSError as exc:
        log.warning("firewall state %s not written: %s", path, exc)
        temporary.unlink(missing_ok=True)
        return False
    return True

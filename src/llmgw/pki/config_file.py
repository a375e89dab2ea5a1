"""Putting the `agent_tls` paths `llmgw server init` wrote into the configuration.

The file is edited as text, never re-dumped: an operator's comments and ordering stay.
A configuration without `agent_tls` gets the block appended; one that already names all
three files is left alone and its paths are the ones used; a missing file is created
holding the block, which is a configuration the server runs on (control plane on, agents
over mutual TLS).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from llmgw.config.tls import TLS
from llmgw.errors import ConfigError
from llmgw.pki.cluster import ClusterFiles


def configured_files(config: Path) -> ClusterFiles | None:
    """The files an existing configuration's `agent_tls` names; None when it has no
    `agent_tls` (or the file does not exist yet); ConfigError when it names only some."""
    if not config.is_file():
        return None
    try:
        data: Any = yaml.safe_load(config.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError([f"{config} is not YAML: {exc}"]) from exc
    tls = data.get("agent_tls") if isinstance(data, dict) else None
    if not tls:
        return None
    if not isinstance(tls, dict):
        raise ConfigError(
            [f"{config}: agent_tls is not a mapping: remove it and run llmgw server init again"]
        )
    fields = {k: str(tls.get(k) or "") for k in ("cert_file", "key_file", "ca_file")}
    if not all(fields.values()):
        raise ConfigError(
            [
                f"{config}: agent_tls names only some of cert_file, key_file and ca_file:"
                " remove the block and run llmgw server init again, which writes all three"
            ]
        )
    return ClusterFiles.from_tls(TLS(**fields))


def block(files: ClusterFiles) -> str:
    """The `agent_tls` setting naming `files`."""
    return (
        "# Written by llmgw server init: the control plane's certificate and the cluster CA\n"
        "# (its key, ca.key, beside it) that agents' certificates are signed by.\n"
        "agent_tls:\n"
        f"  cert_file: {files.server_cert}\n"
        f"  key_file: {files.server_key}\n"
        f"  ca_file: {files.ca_cert}\n"
    )


def add_block(config: Path, files: ClusterFiles) -> None:
    """Appends the block to `config`, creating the file if it is missing."""
    if config.is_file():
        text = config.read_text()
        separator = "" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
        config.write_text(text + separator + block(files))
        return
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("agent_listen: :7443\n\n" + block(files))

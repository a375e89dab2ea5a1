"""The Files and Batch APIs (llmgw.batch) built for a server: with auth on only, since
files belong to a caller's project or person, and only where the server has a state
directory for their bytes (the service's STATE_DIRECTORY, else `state/` beside the
configuration)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from llmgw.auth import AuthGate
from llmgw.batch import BatchService
from llmgw.config import Settings
from llmgw.store import Store

log = logging.getLogger(__name__)


def batch_state_dir(config_dir: Path | None) -> Path | None:
    state_directory = os.environ.get("STATE_DIRECTORY")
    if state_directory:
        return Path(state_directory)
    if config_dir is not None:
        return config_dir / "state"
    return None


def batch_service(
    settings: Settings, store: Store | None, gate: AuthGate | None, config_dir: Path | None
) -> BatchService | None:
    """The service, or None where files and batches are not served (they answer 404)."""
    if store is None or gate is None:
        return None
    state_dir = batch_state_dir(config_dir)
    if state_dir is None:
        log.warning("files and batches are not served: no state directory to keep files in")
        return None
    log.info("files and batches served at /v1/files and /v1/batches, bytes under %s", state_dir)
    return BatchService(settings, store.batch, gate, state_dir, shared=store.shared)

"""`llmgw server rotate-master-key`: every secret the store keeps, sealed again under a new key.

The old key is the configuration's `secrets.master_key` (empty: the rows are plaintext
from before sealing); the new one is given as a reference. Nothing is written unless
every row opens with the old key, and rows already under the new key are left, so a run
cut short can be repeated. Afterwards the configuration must name the new key.
"""

from __future__ import annotations

import os
from pathlib import Path

from llmgw.config.server import Settings
from llmgw.secrets.runtime import open_secrets, sealer_for
from llmgw.store import Store
from llmgw.store.cluster_secret import reseal_all


async def rotate_master_key(
    settings: Settings, config_dir: Path | None, new_key: str
) -> tuple[int, int, str]:
    """(resealed, already under the new key, the new key's id). ConfigError when a key
    cannot be read or a row does not open; StoreError when the store cannot be reached."""
    secrets = await open_secrets(settings, config_dir, renew=False)
    try:
        new = await sealer_for(new_key, settings, config_dir, secrets)
        store = await Store.open(settings.effective_store(config_dir, os.environ.get("STATE_DIRECTORY")))
        try:
            resealed, kept = await reseal_all(store.engine, secrets.sealer, new)
        finally:
            await store.close()
    finally:
        await secrets.close()
    return resealed, kept, new.key_id

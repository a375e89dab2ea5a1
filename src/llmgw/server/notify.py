"""The webhook outbox in a server: built where the server keeps a store (a configuration
with `notify.webhooks` makes it keep one), handed to the control plane and the auth gate
as their `EventSink`, counted in the gateway's registry and run as a background task.

The webhooks' secrets are read before anything else starts (`hooks`), so a reference
that cannot be read stops the start with the resolver's one sentence.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from llmgw.config import Settings
from llmgw.notify.hooks import Hook, resolve_hooks
from llmgw.notify.outbox import NotifyCollector, Outbox
from llmgw.notify.routes import NotifyRoutes
from llmgw.server.gateway import Gateway
from llmgw.store import Store


def hooks(
    settings: Settings, config_dir: Path | None, vault: Mapping[str, str] | None = None
) -> tuple[Hook, ...]:
    """The webhooks with their secrets; ConfigError naming the setting that cannot be read."""
    return resolve_hooks(settings.notify, config_dir, vault)


def start_outbox(
    hooks: tuple[Hook, ...], store: Store, gateway: Gateway
) -> tuple[Outbox, NotifyRoutes, asyncio.Task[None]]:
    """The outbox over the store, its admin routes and its running loop."""
    outbox = Outbox(hooks, store.notify)
    gateway.registry.register(NotifyCollector(outbox))
    task = asyncio.create_task(outbox.run(), name="notify-outbox")
    return outbox, NotifyRoutes(outbox, store.notify), task

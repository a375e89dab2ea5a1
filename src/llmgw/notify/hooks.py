"""The webhooks of `notify.webhooks` as the outbox uses them: named, with their signing
secret read through the one secret resolver (`llmgw.config.secrets.resolve_secret`) at
start, so a reference that cannot be read stops the start with one sentence naming the
setting."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from llmgw.config.notify import Notify, Webhook
from llmgw.config.secrets import resolve_secret


@dataclass(frozen=True)
class Hook:
    name: str
    url: str
    secret: bytes
    """Empty: sent unsigned."""
    events: tuple[str, ...]
    timeout_s: float

    def wants(self, event_type: str) -> bool:
        return not self.events or event_type in self.events


def hook_name(webhook: Webhook) -> str:
    """Its `name`, or the receiver's host where none is given (`Notify` refuses two
    webhooks that would share one)."""
    return webhook.name or urlsplit(webhook.url).netloc


def resolve_hooks(
    notify: Notify, base_dir: Path | None = None, vault: Mapping[str, str] | None = None
) -> tuple[Hook, ...]:
    """Every webhook with its secret read now (`vault`: the values of `vault:` references
    read at start); ConfigError naming the setting when one cannot be read."""
    hooks = []
    for i, webhook in enumerate(notify.webhooks):
        secret = ""
        if webhook.secret_file:
            secret = resolve_secret(
                webhook.secret_file, f"notify.webhooks[{i}].secret_file", base_dir=base_dir, vault=vault
            )
        hooks.append(
            Hook(
                name=hook_name(webhook),
                url=webhook.url,
                secret=secret.encode(),
                events=webhook.events,
                timeout_s=webhook.timeout.total_seconds(),
            )
        )
    return tuple(hooks)

"""Webhook notifications for events an operator must act on, such as a node going away,
a model being parked or a budget running out. They are delivered by llmgw itself, so
small sites get alerts without running an alerting stack.

Each delivery is a JSON POST of `{id, type, time, data}`. With `secret_file`, it carries
an `X-Llmgw-Signature: t=<unix seconds>,v1=<hex>` header, the HMAC-SHA256 of
`"<t>.<body>"` under that secret, so the receiver can tell it came from this cluster and
refuse one replayed later (`llmgw.notify.signing`; docs/operations.md shows the check).
Deliveries are kept in the store and retried (`llmgw.notify.outbox`).
"""

from __future__ import annotations

import difflib
from datetime import timedelta
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.config.secrets import SecretReference
from llmgw.config.values import PositiveDuration, is_http_url
from llmgw.core.strict import Strict

NOTIFY_EVENTS: tuple[str, ...] = (
    "model.parked",
    "model.failed",
    "node.unreachable",
    "node.lost",
    "budget.spent",
    "weights.published",
    "backup.failed",
    "certificate.expiring",
    "canary.rolled_back",
)
"""Every event a webhook can ask for."""


def _known_event(name: str) -> str:
    if name not in NOTIFY_EVENTS:
        guess = difflib.get_close_matches(name, NOTIFY_EVENTS, n=1)
        hint = f"did you mean {guess[0]}?" if guess else f"the events are {', '.join(NOTIFY_EVENTS)}"
        raise ValueError(f"{name!r} is not an event: {hint}")
    return name


NotifyEvent = Annotated[str, AfterValidator(_known_event)]


class Webhook(Strict):
    """One receiver."""

    name: str = ""
    """How logs and the console refer to it; empty is its host."""
    url: str
    """Where events are POSTed, http:// or https://."""
    secret_file: SecretReference = ""
    """The signing secret: a file, env:VARIABLE or vault: reference. Empty sends unsigned,
    and the receiver cannot tell who sent it."""
    events: tuple[NotifyEvent, ...] = ()
    """The events sent here; empty is every event."""
    timeout: PositiveDuration = timedelta(seconds=10)
    """Bound on one delivery attempt; a failed one is retried with backoff for an hour, then given up."""

    def wants(self, event: str) -> bool:
        return not self.events or event in self.events

    @model_validator(mode="after")
    def _reachable(self) -> Webhook:
        if not is_http_url(self.url):
            refuse(
                "Webhook",
                [
                    Problem(
                        ("url",),
                        f"{self.url!r} is not an http:// or https:// address: give the receiver's URL",
                    )
                ],
            )
        return self


class Notify(Strict):
    """Where events are sent. Empty sends nothing."""

    webhooks: tuple[Webhook, ...] = ()
    """Receivers; each event goes to every webhook that wants it."""

    @model_validator(mode="after")
    def _distinct_names(self) -> Notify:
        seen: dict[str, int] = {}
        problems: list[Problem] = []
        for i, hook in enumerate(self.webhooks):
            # An unnamed webhook is called by its host, so two unnamed ones on one host clash too.
            name = hook.name or urlsplit(hook.url).netloc
            if name in seen:
                problems.append(
                    Problem(
                        ("webhooks", i, "name"),
                        f"{name!r} is already webhooks[{seen[name]}]'s name: give each its own",
                    )
                )
            seen.setdefault(name, i)
        refuse("Notify", problems)
        return self

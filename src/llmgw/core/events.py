"""`EventSink`: where a part of llmgw reports something an operator must act on (a node
lost, a budget spent), without knowing who listens.

The server gives the control plane and the auth gate the webhook outbox
(`llmgw.notify.outbox`); without webhooks they get `NO_EVENTS`. `emit` never blocks and
never raises: it is called on the request path and inside the reconcile loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class EventSink(Protocol):
    def emit(self, event_type: str, key: str, data: Mapping[str, Any]) -> None:
        """Reports one occurrence of `event_type`; `key` names the occurrence, so the
        same one reported twice is one event."""


class _Nowhere:
    def emit(self, event_type: str, key: str, data: Mapping[str, Any]) -> None:
        return None


NO_EVENTS: EventSink = _Nowhere()

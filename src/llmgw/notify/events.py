"""One notification as it goes over the wire, and its id.

The body is `{"id", "type", "time", "data"}` (and `"cluster"` where one is named). The id
is derived from the event's type and a key saying which occurrence it is (the replica
that failed, the node and when it went silent, the budget and its period), not drawn at
random: the same occurrence emitted twice, by a control plane that restarted or by two
gateways that both saw a budget run out, has one id, and the outbox delivers one id once
per webhook.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

TEST_EVENT = "notify.test"
"""What `llmgw ctl notify test` sends; never one a webhook subscribes to."""


def event_id(event_type: str, key: str) -> str:
    """`evt_` and 24 hex digits of SHA-256 over the type and the occurrence's key."""
    digest = hashlib.sha256(f"{event_type}\n{key}".encode()).hexdigest()
    return f"evt_{digest[:24]}"


@dataclass(frozen=True)
class Event:
    """One occurrence of an event."""

    id: str
    type: str
    time: float
    """When it happened, UNIX seconds."""
    data: Mapping[str, Any] = field(default_factory=dict)
    cluster: str = ""

    @classmethod
    def of(cls, event_type: str, key: str, data: Mapping[str, Any], now: float, cluster: str = "") -> Event:
        return cls(event_id(event_type, key), event_type, now, data, cluster)

    def body(self) -> bytes:
        """The JSON POSTed: the exact bytes the signature covers."""
        payload: dict[str, Any] = {"id": self.id, "type": self.type, "time": round(self.time, 3)}
        if self.cluster:
            payload["cluster"] = self.cluster
        payload["data"] = dict(self.data)
        return orjson.dumps(payload)

"""Webhook notifications: the events an operator must act on, sent to `notify.webhooks`.

Pure parts at the bottom (`events`: the payload and its id; `signing`: the
`X-Llmgw-Signature` header and how a receiver checks it; `schedule`: when a failed
delivery is tried again), the outbox over them (`outbox`: events queued without
blocking anyone, kept in the store, delivered and retried by one background task), and
the admin routes that show the delivery log and send a test event (`routes`).

Emitters (the control plane, the auth gate) see only `llmgw.core.events.EventSink`; the
server hands them the outbox.
"""

from __future__ import annotations

from llmgw.notify.events import Event, event_id
from llmgw.notify.schedule import RetrySchedule
from llmgw.notify.signing import SIGNATURE_HEADER, sign, verify

__all__ = ["SIGNATURE_HEADER", "Event", "RetrySchedule", "event_id", "sign", "verify"]

"""The agent port's certificates over time: revocations read from the store, and ends
coming near.

Every `interval` the revoked serials (`llmgw node remove`) are read from the store and
handed to the hub, which refuses them at registration and sends away a node connected
with one; a store that cannot be read keeps the set in force (said once). Every
`expiry_every` the control plane's own certificate and each node's (as shown in its
handshake) are checked against `llmgw.pki.expiry.WARN_AHEAD`: each one due is a warning
line and a `certificate.expiring` event, once per certificate per process (the event's
key is the serial, so a restarted server's second emission is the same event).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Protocol

from llmgw.control.runtime.background import Background, StoreOutage
from llmgw.core.events import NO_EVENTS, EventSink
from llmgw.pki.expiry import CertificateEnd, expiring, read_not_after, warning

log = logging.getLogger(__name__)

EXPIRING_EVENT = "certificate.expiring"
EXPIRY_EVERY = timedelta(hours=1)


class RevokedSource(Protocol):
    """The store's node certificates (`NodeCertRepo`)."""

    async def revoked_serials(self) -> frozenset[str]: ...


class CertHub(Protocol):
    """What the watch needs of the agent hub."""

    certificates: dict[str, tuple[str, float]]

    async def refuse_revoked(self, revoked: frozenset[str]) -> list[str]: ...


def own_certificate(cert_file: str) -> CertificateEnd | None:
    """The control plane's certificate on the agent port; None without one (or unreadable:
    the listener has already refused to start on a certificate it cannot read)."""
    if not cert_file:
        return None
    try:
        serial, not_after = read_not_after(Path(cert_file))
    except (OSError, ValueError) as exc:
        log.warning(
            "agent_tls.cert_file %s: its end cannot be read, so it is not watched: %s", cert_file, exc
        )
        return None
    return CertificateEnd("control plane", serial, not_after)


class CertificateWatch(Background):
    """Revocations into the hub, and expiry warnings."""

    task_name = "certificate-watch"

    def __init__(
        self,
        hub: CertHub,
        source: RevokedSource | None,
        *,
        own: CertificateEnd | None,
        interval: timedelta,
        events: EventSink = NO_EVENTS,
        clock: Callable[[], float] = time.time,
        expiry_every: timedelta = EXPIRY_EVERY,
    ) -> None:
        self._hub = hub
        self._source = source
        self._own = own
        self._interval = interval
        self._events = events
        self._clock = clock
        self._expiry_every_s = expiry_every.total_seconds()
        self._warned: set[str] = set()
        self._outage = StoreOutage(log, "certificate watch", "keeping the revoked certificates read before")

    def certificates(self) -> list[CertificateEnd]:
        ends = [CertificateEnd(f"node {n}", s, t) for n, (s, t) in sorted(self._hub.certificates.items())]
        return ([self._own] if self._own is not None else []) + ends

    def check_expiry(self) -> list[CertificateEnd]:
        """Warns of each certificate newly due; those warned of now."""
        now = self._clock()
        due = [c for c in expiring(self.certificates(), now) if c.serial not in self._warned]
        for certificate in due:
            self._warned.add(certificate.serial)
            log.warning(warning(certificate, now))
            self._events.emit(
                EXPIRING_EVENT,
                certificate.serial,
                {
                    "holder": certificate.holder,
                    "serial": certificate.serial,
                    "not_after": certificate.not_after,
                    "days_left": round(certificate.days_left(now), 1),
                },
            )
        return due

    async def check_revoked(self) -> None:
        source = self._source
        if source is None:
            return

        async def work() -> None:
            await self._hub.refuse_revoked(await source.revoked_serials())

        await self._outage.attempt(work)

    async def check(self) -> None:
        await self.check_revoked()
        self.check_expiry()

    async def run(self) -> None:
        last_expiry = self._clock()
        while True:
            await asyncio.sleep(self._interval.total_seconds())
            await self.check_revoked()
            if self._clock() - last_expiry >= self._expiry_every_s:
                last_expiry = self._clock()
                self.check_expiry()

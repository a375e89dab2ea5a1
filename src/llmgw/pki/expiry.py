"""When a certificate runs out, and which ones to warn about: pure, with `now` given.

The control plane reads its own certificate's end from its file (`read_not_after`) and
each node's from the certificate the node showed in its handshake (`peer_not_after`,
from `ssl`'s peer certificate dictionary), then asks `expiring` which are due a warning.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from cryptography import x509

WARN_AHEAD = timedelta(days=30)
"""How long before a certificate's end the operator is told: time to renew it by hand
(`llmgw node add` again, `llmgw server init --force`) without hurry."""


@dataclass(frozen=True)
class CertificateEnd:
    """One certificate in use: whose it is, its serial, and its not-after (UNIX seconds)."""

    holder: str
    """`control plane` or `node NAME`."""
    serial: str
    not_after: float

    def days_left(self, now: float) -> float:
        return (self.not_after - now) / 86_400.0


def expiring(
    certificates: Iterable[CertificateEnd], now: float, ahead: timedelta = WARN_AHEAD
) -> list[CertificateEnd]:
    """The certificates whose end is within `ahead` of `now` (or already past), soonest first."""
    horizon = now + ahead.total_seconds()
    return sorted((c for c in certificates if c.not_after <= horizon), key=lambda c: c.not_after)


def warning(certificate: CertificateEnd, now: float) -> str:
    """The log line for one certificate due a warning."""
    days = certificate.days_left(now)
    if days <= 0:
        return (
            f"the {certificate.holder} certificate (serial {certificate.serial}) has expired: issue a new one"
        )
    return (
        f"the {certificate.holder} certificate (serial {certificate.serial}) expires in {days:.0f} day(s):"
        " issue a new one before then"
    )


def read_not_after(path: Path) -> tuple[str, float]:
    """(serial, not-after) of the first certificate in a PEM file."""
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    return format(cert.serial_number, "X"), cert.not_valid_after_utc.timestamp()


def peer_not_after(peercert: Mapping[str, Any] | None) -> tuple[str, float] | None:
    """(serial, not-after) of a verified peer certificate (`SSLObject.getpeercert()`), or
    None without one."""
    if not peercert or "notAfter" not in peercert or "serialNumber" not in peercert:
        return None
    serial = format(int(str(peercert["serialNumber"]), 16), "X")
    return serial, float(ssl.cert_time_to_seconds(str(peercert["notAfter"])))

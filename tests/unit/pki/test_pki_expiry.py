"""Which certificates are due a warning, with the clock given: 30 days ahead, soonest
first, expired ones included; the watch warns of each once, as a log line and a
`certificate.expiring` event keyed by the serial."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from llmgw.control.runtime.cert_watch import EXPIRING_EVENT, CertificateWatch
from llmgw.pki.expiry import CertificateEnd, expiring, peer_not_after, warning

DAY = 86_400.0
NOW = 1_800_000_000.0


def _end(holder: str, serial: str, days: float) -> CertificateEnd:
    return CertificateEnd(holder, serial, NOW + days * DAY)


def test_only_those_ending_within_thirty_days_are_due_soonest_first() -> None:
    certificates = [_end("node a", "A", 31), _end("node b", "B", 29.5), _end("control plane", "C", -1)]
    assert [c.serial for c in expiring(certificates, NOW)] == ["C", "B"]
    assert [c.serial for c in expiring(certificates, NOW, ahead=timedelta(days=40))] == ["C", "B", "A"]
    assert expiring(certificates, NOW - 10 * DAY) == [certificates[2]]


def test_the_warning_says_who_when_and_what_to_do() -> None:
    assert warning(_end("node a", "A1", 12), NOW) == (
        "the node a certificate (serial A1) expires in 12 day(s): issue a new one before then"
    )
    assert "has expired" in warning(_end("control plane", "C", -0.5), NOW)


def test_a_peer_certificate_is_read_as_ssl_reports_it() -> None:
    shown = {"serialNumber": "0ABC", "notAfter": "Dec  3 16:01:12 2027 GMT"}
    assert peer_not_after(shown) == ("ABC", datetime(2027, 12, 3, 16, 1, 12, tzinfo=UTC).timestamp())
    assert peer_not_after({}) is None
    assert peer_not_after(None) is None


class _Hub:
    def __init__(self) -> None:
        self.certificates: dict[str, tuple[str, float]] = {}
        self.revoked: frozenset[str] = frozenset()

    async def refuse_revoked(self, revoked: frozenset[str]) -> list[str]:
        self.revoked = revoked
        return []


class _Events:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, Mapping[str, Any]]] = []

    def emit(self, event_type: str, key: str, data: Mapping[str, Any]) -> None:
        self.emitted.append((event_type, key, data))


def test_the_watch_warns_of_each_certificate_once(caplog: pytest.LogCaptureFixture) -> None:
    hub, events = _Hub(), _Events()
    clock = [NOW]
    watch = CertificateWatch(
        hub,
        None,
        own=_end("control plane", "C0", 20),
        interval=timedelta(seconds=1),
        events=events,
        clock=lambda: clock[0],
    )
    hub.certificates = {"n1": ("A1", NOW + 200 * DAY), "n2": ("B2", NOW + 5 * DAY)}
    with caplog.at_level(logging.WARNING):
        assert [c.serial for c in watch.check_expiry()] == ["B2", "C0"]
    assert [(t, k) for t, k, _ in events.emitted] == [(EXPIRING_EVENT, "B2"), (EXPIRING_EVENT, "C0")]
    assert events.emitted[0][2]["holder"] == "node n2"
    assert events.emitted[0][2]["days_left"] == 5.0
    assert "node n2 certificate (serial B2) expires in 5 day(s)" in caplog.text

    assert watch.check_expiry() == []  # said once
    clock[0] = NOW + 180 * DAY  # n1's comes within 30 days
    assert [c.serial for c in watch.check_expiry()] == ["A1"]
    assert len(events.emitted) == 3

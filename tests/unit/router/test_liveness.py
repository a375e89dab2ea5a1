"""The liveness check of a non-streamed try without a generation bound: the watch is
moved on every response_header while the replica's metrics are fresh, up to what is
left of total (then named total); a replica gone quiet lets it expire as the
response_header timeout, and a provider (no metrics) is waited for up to total. The
watchdog's sweep honours the check."""

from __future__ import annotations

from typing import cast

import pytest

from llmgw.errors import HeaderTimeout, PhaseTimeout, TotalTimeout
from llmgw.router.endpoints import Endpoint, EndpointRegistry, EndpointSpec
from llmgw.router.forward import bounded
from llmgw.router.liveness import Liveness, replica_alive
from llmgw.upstream import Connection, UpstreamClient
from llmgw.upstream.watchdog import Watchdog


class Exchange:
    """Stands in for the connection a watch fails: records the error it is failed with."""

    def __init__(self) -> None:
        self.error: Exception | None = None

    def expire(self, error: Exception) -> None:
        self.error = error


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _endpoint(*, external: bool = False) -> Endpoint:
    registry = EndpointRegistry(UpstreamClient(), failure_threshold=3, cooldown=10.0)
    registry.publish([EndpointSpec(id="r1", url="http://127.0.0.1:9", models=("m",), external=external)])
    return registry.for_model("m")[0]


@pytest.mark.parametrize(
    ("scraped_at", "now", "alive"),
    [(None, 100.0, False), (95.0, 100.0, True), (90.0, 100.0, True), (89.9, 100.0, False)],
)
def test_a_replica_is_alive_while_its_metrics_are_fresh(
    scraped_at: float | None, now: float, alive: bool
) -> None:
    assert replica_alive(scraped_at, now, 10.0) is alive


def _watched(endpoint: Endpoint, clock: Clock) -> tuple[Watchdog, Exchange, Liveness]:
    """A watch as `fetch` arms it: response_header 5 s, total 30 s, from loop time 0."""
    watchdog = Watchdog()
    conn = Exchange()
    watch = watchdog.arm(cast(Connection, conn), 5.0, HeaderTimeout, 5.0)
    liveness = Liveness(every_s=5.0, fresh_s=10.0, total_s=1800.0, clock=clock)
    watch.renew = liveness
    watch.subject = endpoint
    watch.until = 30.0
    return watchdog, conn, liveness


def test_a_replica_answering_its_metrics_is_waited_for_up_to_total() -> None:
    endpoint = _endpoint()
    clock = Clock(1000.0)
    watchdog, conn, _ = _watched(endpoint, clock)
    for loop_now in (5.0, 10.0, 15.0, 20.0, 25.0):
        endpoint.scraped_at = clock.now = 1000.0 + loop_now
        assert watchdog.sweep(loop_now) == 0
        assert len(watchdog) == 1
    endpoint.scraped_at = clock.now = 1030.0
    assert watchdog.sweep(30.0) == 1
    error = conn.error
    assert isinstance(error, TotalTimeout)
    assert error.seconds == 1800.0


def test_a_replica_gone_quiet_fails_the_try_as_the_response_header_timeout() -> None:
    endpoint = _endpoint()
    endpoint.scraped_at = 1000.0
    clock = Clock(1005.0)
    watchdog, conn, _ = _watched(endpoint, clock)
    assert watchdog.sweep(5.0) == 0  # scraped 5 s ago: alive
    clock.now = 1011.0
    assert watchdog.sweep(10.0) == 1  # nothing read for 11 s
    error = conn.error
    assert isinstance(error, HeaderTimeout)
    assert "router.timeouts.response_header" in str(error)


def test_a_replica_never_scraped_fails_at_the_first_check() -> None:
    watchdog, conn, _ = _watched(_endpoint(), Clock(1000.0))
    assert watchdog.sweep(4.9) == 0
    assert watchdog.sweep(5.0) == 1
    assert isinstance(conn.error, HeaderTimeout)


def test_a_provider_publishes_no_metrics_and_is_waited_for_up_to_total() -> None:
    watchdog, conn, _ = _watched(_endpoint(external=True), Clock(1000.0))
    for loop_now in (5.0, 10.0, 25.0):
        assert watchdog.sweep(loop_now) == 0
    assert watchdog.sweep(30.0) == 1
    assert isinstance(conn.error, TotalTimeout)


@pytest.mark.parametrize(
    ("seconds", "left", "expected"),
    [
        (5.0, 100.0, (5.0, HeaderTimeout, 5.0)),
        (5.0, 5.0, (5.0, HeaderTimeout, 5.0)),
        (60.0, 12.5, (12.5, TotalTimeout, 1800.0)),
        (0.0, 12.5, (12.5, TotalTimeout, 1800.0)),
    ],
    ids=["own-bound", "equal", "total-nearer-names-total", "no-own-bound"],
)
def test_a_phase_is_bounded_by_the_nearer_bound_and_names_it(
    seconds: float, left: float, expected: tuple[float, type[PhaseTimeout], float]
) -> None:
    assert bounded(seconds, HeaderTimeout, left, 1800.0) == expected

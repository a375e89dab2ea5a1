"""Demand seen by every server reaching the leader's plan: the pure merge of the other
servers' reports into the leader's own (silent servers and stale waits ignored), the
shift between the store's clock and a server's, what a server writes when; the demand
rows on a real SQLite store with the database clock injected; and two planes sharing
that store, where a request waiting on the follower wakes the leader and keeps its
model wanted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from runtime_world import Clock, catalog, sim_model

from llmgw.control.decisions.cluster import ModelDemand
from llmgw.control.decisions.demand import Asked, ServerDemand, changed_reports, merge_demand, on_local_clock
from llmgw.control.runtime.demand_sync import DemandSync, silent_after
from llmgw.control.runtime.plane import ControlPlane, PlaneConfig
from llmgw.control.tables.demand_table import DemandTable
from llmgw.protocol.messages import NodeSettings
from llmgw.router.endpoints import EndpointRegistry
from llmgw.store import Store
from llmgw.store.lease import LeaderLease, LeaseTable
from llmgw.upstream import UpstreamClient

NOW = 10_000.0


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


def row(
    model: str, holder: str, *, asked: float | None = None, waiting: float | None = None, at: float = NOW
) -> ServerDemand:
    return ServerDemand(model, holder, Asked(asked, waiting), updated_at=at)


def merge(local: dict[str, ModelDemand], *rows: ServerDemand) -> dict[str, ModelDemand]:
    return merge_demand(local, rows, now=NOW, silent_after=30.0, wait_limit=60.0)


# --- the merge ------------------------------------------------------------------------


def test_another_servers_later_ask_is_the_models_last_request() -> None:
    local = {"chat": ModelDemand(last_request_at=NOW - 100)}
    merged = merge(local, row("chat", "b", asked=NOW - 5), row("chat", "c", asked=NOW - 50))
    assert merged == {"chat": ModelDemand(waiting=False, last_request_at=NOW - 5)}


def test_an_earlier_ask_elsewhere_does_not_move_the_last_request_back() -> None:
    merged = merge({"chat": ModelDemand(last_request_at=NOW - 1)}, row("chat", "b", asked=NOW - 90))
    assert merged["chat"].last_request_at == NOW - 1


def test_a_model_asked_for_only_elsewhere_is_in_demand() -> None:
    assert merge({}, row("lazy", "b", asked=NOW - 3)) == {"lazy": ModelDemand(last_request_at=NOW - 3)}


def test_a_request_waiting_elsewhere_makes_the_model_wait_and_counts_as_an_ask() -> None:
    merged = merge({}, row("lazy", "b", asked=NOW - 20, waiting=NOW - 2))
    assert merged == {"lazy": ModelDemand(waiting=True, last_request_at=NOW - 2)}


def test_a_wait_older_than_the_activation_wait_has_given_up() -> None:
    merged = merge({}, row("lazy", "b", asked=NOW - 61, waiting=NOW - 61))
    assert merged == {"lazy": ModelDemand(waiting=False, last_request_at=NOW - 61)}


def test_a_silent_servers_rows_are_ignored_and_a_living_ones_kept() -> None:
    merged = merge(
        {},
        row("lazy", "gone", asked=NOW - 1, waiting=NOW - 1, at=NOW - 31),
        row("kept", "alive", asked=NOW - 40, at=NOW - 30),
    )
    assert merged == {"kept": ModelDemand(last_request_at=NOW - 40)}


def test_a_local_wait_stays_a_wait_whatever_the_others_say() -> None:
    local = {"lazy": ModelDemand(waiting=True, last_request_at=NOW)}
    assert merge(local, row("lazy", "b", asked=NOW - 9))["lazy"] == ModelDemand(True, NOW)


def test_rows_move_onto_the_local_clock_by_one_reading_of_both() -> None:
    store_now, local_now = 500.0, NOW
    [moved] = on_local_clock([row("m", "b", asked=490.0, waiting=None, at=499.0)], store_now, local_now)
    assert moved == row("m", "b", asked=NOW - 10, waiting=None, at=NOW - 1)


# --- what a server writes -------------------------------------------------------------


def test_only_new_and_changed_reports_are_written_and_dropped_ones_deleted() -> None:
    written = {"a": Asked(100.0), "b": Asked(100.0), "c": Asked(100.0), "gone": Asked(1.0)}
    now = {
        "a": Asked(100.4),  # moved less than the resolution
        "b": Asked(101.5),  # moved more
        "c": Asked(100.0, waiting_since=100.2),  # a request started waiting
        "new": Asked(99.0),
    }
    changed, gone = changed_reports(now, written, resolution=1.0)
    assert changed == {"b": Asked(101.5), "c": Asked(100.0, 100.2), "new": Asked(99.0)}
    assert gone == ["gone"]
    assert changed_reports({"c": Asked(100.0)}, {"c": Asked(100.0, 100.2)}, 1.0) == ({"c": Asked(100.0)}, [])


def test_the_silence_bound_allows_two_missed_marks() -> None:
    assert silent_after(timedelta(seconds=1), timedelta(seconds=5)) == timedelta(seconds=11)


# --- the rows in a real store ---------------------------------------------------------


def test_rows_are_kept_on_the_stores_clock_and_read_back_by_everyone(tmp_path: Path) -> None:
    async def test() -> None:
        db_now = [5_000.0]
        store = await Store.open(str(tmp_path / "store.db"))
        try:
            table = DemandTable(store.engine, db_time=lambda: db_now[0])
            # Server a's clock is 1000 s ahead of the store's; b's agrees with it.
            await table.write("a", {"chat": Asked(6_000.0 - 4, 6_000.0 - 1)}, local_now=6_000.0)
            await table.write("b", {"chat": Asked(4_998.0), "embed": Asked(4_990.0)}, local_now=5_000.0)
            snapshot = await table.read()
            assert snapshot.now == 5_000.0
            assert [(r.model, r.holder, r.asked, r.updated_at) for r in snapshot.rows] == [
                ("chat", "a", Asked(4_996.0, 4_999.0), 5_000.0),
                ("chat", "b", Asked(4_998.0), 5_000.0),
                ("embed", "b", Asked(4_990.0), 5_000.0),
            ]

            db_now[0] = 5_010.0
            await table.write("a", {"chat": Asked(6_008.0)}, local_now=6_010.0)  # the wait ended
            await table.write("b", {}, ["embed"], local_now=5_010.0)
            snapshot = await table.read()
            assert [(r.model, r.holder, r.asked) for r in snapshot.rows] == [
                ("chat", "a", Asked(5_008.0)),
                ("chat", "b", Asked(4_998.0)),
            ]
            assert {r.holder: r.updated_at for r in snapshot.rows} == {"a": 5_010.0, "b": 5_010.0}

            db_now[0] = 5_020.0
            assert await table.touch("b") == 1
            assert await table.touch("nobody") == 0
            db_now[0] = 5_025.0
            assert await table.forget(timedelta(seconds=10)) == 1, "a was silent for 15 s"
            assert [r.holder for r in (await table.read()).rows] == ["b"]
        finally:
            await store.close()

    run(test)


# --- two planes sharing a store -------------------------------------------------------


def _config() -> PlaneConfig:
    return PlaneConfig(
        interval=timedelta(seconds=1),
        base_backoff=timedelta(seconds=1),
        max_backoff=timedelta(seconds=10),
        unreachable_after=timedelta(seconds=4),
        lost_after=timedelta(seconds=10),
        node_settings=NodeSettings(port_range=(21000, 21999)),
        tz=ZoneInfo("UTC"),
        activation_wait=timedelta(seconds=60),
    )


def test_a_request_waiting_on_a_follower_reaches_the_leaders_plan_at_once(tmp_path: Path) -> None:
    async def test() -> None:
        clock = Clock()  # both servers' clock, moved by hand
        asked: dict[str, float] = {}  # the follower's router's last_asked
        store = await Store.open(str(tmp_path / "store.db"))
        cat = catalog(sim_model("lazy", min=0, max=1, idle_timeout="30s"))
        planes = {
            name: ControlPlane(
                _config(),
                cat,
                EndpointRegistry(UpstreamClient(), failure_threshold=1, cooldown=10.0),
                clock=clock,
                is_leader=lambda name=name: name == "leader",  # type: ignore[misc]
            )
            for name in ("leader", "follower")
        }
        follower, leader = planes["follower"], planes["leader"]
        follower.watch_requests(asked, clock)
        syncs: dict[str, DemandSync] = {}
        try:
            for name, plane in planes.items():
                await plane.observe_leadership()
                lease = LeaderLease(LeaseTable(store.engine), timedelta(seconds=3), holder=name)
                table = DemandTable(store.engine, db_time=clock)
                syncs[name] = DemandSync(
                    plane, table, lease, interval=timedelta(seconds=1), refresh=timedelta(seconds=3)
                )
            follower.listen_activations(syncs["follower"].urge)
            assert leader.demand() == {}

            # A request on the follower waits for lazy: its sync is urged to write now.
            asked["lazy"] = clock.now
            follower.activate("lazy")
            assert syncs["follower"]._urgent.is_set()
            await syncs["follower"].step()
            leader._wake.clear()
            await syncs["leader"].step()
            assert leader._wake.is_set(), "a new wait elsewhere runs the leader's pass at once"
            assert leader.demand() == {"lazy": ModelDemand(waiting=True, last_request_at=clock.now)}

            # The follower keeps asking; the leader sees each ask, and no wait any more
            # once the follower's request was served.
            clock.advance(20)
            asked["lazy"] = clock.now
            follower._waiting.clear()
            await syncs["follower"].step()
            await syncs["leader"].step()
            assert leader.demand() == {"lazy": ModelDemand(waiting=False, last_request_at=clock.now)}

            # The follower falls silent past the bound: its word no longer counts.
            clock.advance(syncs["leader"].silent_after.total_seconds() + 1)
            await syncs["leader"].step()
            assert leader.demand() == {}
        finally:
            await store.close()

    run(test)

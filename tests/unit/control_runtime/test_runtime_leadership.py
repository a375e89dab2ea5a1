"""Leadership in the control plane: a plane that gains the lease waits for its agents
before placing and keeps routing the set it followed meanwhile; one that loses it sends
its agents away and forgets them. Agents given several servers dial until the leader
takes them, and move when it sends them away. The replica table carries the leader's
set to the others, fenced by the lease and judged fresh by its term.

The plane runs with a hand-moved clock; agent and hubs talk over real loopback
sockets; the replica table is a real SQLite store with the database clock injected."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import aiohttp
from runtime_world import Clock, catalog, inventory, sim_model

from llmgw.agent.client import AgentLink, round_delay
from llmgw.agent.node import Node, NodeConfig
from llmgw.control.runtime.hub import AgentHub
from llmgw.control.runtime.plane import ControlPlane, PlaneConfig
from llmgw.control.tables.replica_table import ReplicaTable, servable
from llmgw.protocol.messages import (
    Error,
    FetchProgress,
    Heartbeat,
    NodeSettings,
    Register,
    ReplicaState,
    ReplicaStatus,
)
from llmgw.router.endpoints import EndpointRegistry, EndpointSpec
from llmgw.store import Store
from llmgw.store.lease import LeaseTable
from llmgw.upstream import UpstreamClient

WAIT_S = 10.0


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


async def until(what: Callable[[], bool], explain: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not what():
        assert loop.time() < deadline, f"{explain}: not within {WAIT_S:g}s"
        await asyncio.sleep(0.02)


def _config() -> PlaneConfig:
    return PlaneConfig(
        interval=timedelta(seconds=30),
        base_backoff=timedelta(seconds=1),
        max_backoff=timedelta(seconds=10),
        unreachable_after=timedelta(seconds=4),
        lost_after=timedelta(seconds=10),
        node_settings=NodeSettings(port_range=(21000, 21999)),
        tz=ZoneInfo("UTC"),
        activation_wait=timedelta(seconds=60),
    )


def _spec(replica_id: str, model: str = "chat") -> EndpointSpec:
    return EndpointSpec(
        id=replica_id, url="http://127.0.0.1:21000", models=(model,), engine="sim", pool=model
    )


def test_a_new_leader_adopts_first_and_a_deposed_one_forgets_its_agents() -> None:
    async def test() -> None:
        clock = Clock()
        leading = [False]
        registry = EndpointRegistry(UpstreamClient(), failure_threshold=1, cooldown=10.0)
        plane = ControlPlane(
            _config(),
            catalog(sim_model("chat", min=1)),
            registry,
            clock=clock,
            is_leader=lambda: leading[0],
            term=lambda: 5 if leading[0] else None,
        )
        await plane.start()
        try:
            plane.publisher.follow([_spec("old-1")])  # what the store said the leader runs
            assert not plane.leading

            leading[0] = True
            await plane.run_pass()
            assert plane.leading
            assert not plane.settled()
            assert [e.id for e in registry.for_model("chat")] == ["old-1"], "still routed while settling"

            plane.registered(
                Register(
                    node_id="n1",
                    inventory=inventory(),
                    replicas=(
                        ReplicaState(
                            replica_id="old-1",
                            model="chat",
                            profile="sim",
                            state=ReplicaStatus.READY,
                            url="http://127.0.0.1:21000",
                        ),
                    ),
                )
            )
            clock.advance(3.9)
            await plane.run_pass()
            assert [r.id for r in plane.book.all()] == ["old-1"], "nothing placed before settling"
            clock.advance(0.2)
            await plane.run_pass()
            assert plane.settled()
            assert plane.publisher.inherited == ()
            assert [e.id for e in registry.for_model("chat")] == ["old-1"]
            assert [r.id for r in plane.book.all()] == ["old-1"], "adopted, not started again"
            kept = plane.book.get("old-1")
            assert kept is not None
            assert kept.adopted

            leading[0] = False
            await plane.run_pass()
            assert not plane.leading
            assert not plane.settled()
            assert plane.book.all() == []
            assert plane.nodes() == []
            assert [e.id for e in registry.for_model("chat")] == ["old-1"], "routed until the store says"
        finally:
            await plane.close()

    run(test)


@dataclass
class Heard:
    """A hub's events, as far as these tests look."""

    registrations: list[str] = field(default_factory=list)

    def registered(self, message: Register) -> None:
        self.registrations.append(message.node_id)

    def heartbeat(self, node_id: str, message: Heartbeat) -> None:
        pass

    def replica_state(self, node_id: str, message: ReplicaState) -> None:
        pass

    def fetch_progress(self, node_id: str, message: FetchProgress) -> None:
        pass

    def refused(self, node_id: str, message: Error) -> None:
        pass

    def disconnected(self, node_id: str) -> None:
        pass


def test_an_agent_with_two_servers_registers_with_the_leader_and_follows_it(tmp_path: Path) -> None:
    async def test() -> None:
        leader = ["b"]
        heard = {"a": Heard(), "b": Heard()}
        hubs = {
            name: AgentHub(
                heard[name],
                settings=NodeSettings(),
                heartbeat_interval=timedelta(seconds=1),
                accepting=lambda name=name: leader[0] == name,  # type: ignore[misc]
            )
            for name in ("a", "b")
        }
        for hub in hubs.values():
            await hub.start("127.0.0.1", 0, None)
        config = NodeConfig(node_id="n1", state_dir=tmp_path, weights_dir=tmp_path / "weights")
        stop = asyncio.Event()
        async with aiohttp.ClientSession() as session:
            node = Node(config, session, discover=inventory)
            await node.start()
            servers = f"127.0.0.1:{hubs['a'].port},127.0.0.1:{hubs['b'].port}"
            link = AgentLink(node, session, servers, ssl_context=None)
            task = asyncio.create_task(link.run(stop))
            try:
                await until(lambda: heard["b"].registrations == ["n1"], "registration with the leader b")
                assert heard["a"].registrations == [], "a stands by and refuses"
                assert hubs["b"].connected("n1")

                leader[0] = "a"
                await hubs["b"].dismiss_all()
                await until(lambda: heard["a"].registrations == ["n1"], "registration with the new leader a")
                assert heard["b"].registrations == ["n1"], "b refused it once it no longer led"
                assert hubs["a"].connected("n1")
            finally:
                stop.set()
                await asyncio.wait_for(task, WAIT_S)
                await node.close()
                for hub in hubs.values():
                    await hub.close()

    run(test)


def test_the_wait_between_rounds_is_short_when_a_server_said_it_does_not_lead() -> None:
    assert round_delay(0, follower_answered=False, rng=lambda: 0.0) == 0.5
    assert round_delay(6, follower_answered=False, rng=lambda: 0.0) == 30.0
    assert round_delay(6, follower_answered=True, rng=lambda: 0.0) == 1.0
    assert round_delay(0, follower_answered=True, rng=lambda: 0.0) == 0.5


def test_the_replica_table_is_written_by_the_lease_holder_alone_and_ages_with_the_term(
    tmp_path: Path,
) -> None:
    async def test() -> None:
        now = [1000.0]
        store = await Store.open(str(tmp_path / "store.db"))
        try:
            leases = LeaseTable(store.engine, db_time=lambda: now[0])
            table = ReplicaTable(store.engine, db_time=lambda: now[0])
            ttl = timedelta(seconds=15)
            grace = timedelta(seconds=20)
            first = await leases.claim("control", "a", ttl)
            assert first is not None
            assert first.term == 1

            assert await table.write([_spec("r1"), _spec("r2")], holder="a", term=1)
            assert not await table.write([_spec("x")], holder="b", term=1), "b does not hold the lease"
            assert await table.write([_spec("r2")], holder="a", term=1), "the set is replaced whole"
            snapshot = await table.read()
            assert [(r.replica_id, r.term, r.pool) for r in snapshot.replicas] == [("r2", 1, "chat")]
            assert [r.replica_id for r in servable(snapshot, grace)] == ["r2"]
            assert snapshot.replicas[0].spec("key").api_key == "key"

            now[0] += 16  # a stopped renewing; b takes over at term 2
            assert not await table.write([_spec("r3")], holder="a", term=1), "a's lease expired"
            second = await leases.claim("control", "b", ttl)
            assert second is not None
            assert second.term == 2
            assert not await table.write([_spec("r3")], holder="a", term=1), "a is deposed"
            snapshot = await table.read()
            assert [r.replica_id for r in servable(snapshot, grace)] == ["r2"], "the old set, within grace"
            now[0] += 21
            assert servable(await table.read(), grace) == (), "no leader vouched for it since"
            assert await leases.claim("control", "b", ttl) is not None  # b renews: still term 2
            assert await table.write([_spec("r2")], holder="b", term=2)
            assert [(r.replica_id, r.term) for r in servable(await table.read(), grace)] == [("r2", 2)]
        finally:
            await store.close()

    run(test)

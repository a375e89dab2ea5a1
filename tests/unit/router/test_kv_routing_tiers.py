"""Tier 0 (the KV index) ahead of tier 1 (the prefix tree): the picker's rules on the
index's counts, and the tokenize call falling back when a replica is too slow."""

from __future__ import annotations

import asyncio
import socket

import orjson

from llmgw.engines.load import EngineLoad
from llmgw.protocol.kv_events import Batch, Stored
from llmgw.router.affinity import SessionAffinity
from llmgw.router.breaker import Breaker
from llmgw.router.endpoints import Endpoint, EndpointRegistry, EndpointSpec
from llmgw.router.kv_routing import KVRouting, KVRules
from llmgw.router.picker import Picker, PrefixRules
from llmgw.router.prefix_tree import PrefixTree
from llmgw.router.request import Kind, parse_request
from llmgw.router.scoring import ScoringTargets
from llmgw.upstream import UpstreamClient

NOW = 100.0
TARGETS = ScoringTargets(
    target_waiting=8.0, target_inflight=4.0, kv_ceiling=0.8, session_load_factor=1.5, stale_after=10.0
)
RULES = PrefixRules(min_match=8, match_ratio=0.5, balance_abs=4.0, balance_rel=1.5)
PROMPT = "system\nYou are a careful reviewer of shipping contracts and invoices.\n"
_CLIENT = UpstreamClient()


def replica(rid: str, inflight: int = 0, url: str = "", kv_events: str = "") -> Endpoint:
    spec = EndpointSpec(id=rid, url=url or f"http://{rid}.internal:8000", models=("m",), kv_events=kv_events)
    e = Endpoint(spec, _CLIENT.pool_for(spec.url), Breaker(3, 10.0))
    e.inflight = inflight
    e.load = EngineLoad(waiting=0.0, running=float(inflight), kv_usage=0.0)
    e.scraped_at = NOW
    return e


def picker(tree: PrefixTree | None = None) -> Picker:
    return Picker(TARGETS, SessionAffinity(100, 600.0), tree, RULES, kv_min_blocks=4)


def test_the_replica_holding_most_leading_blocks_wins() -> None:
    a, b = replica("a"), replica("b")
    chosen, why = picker().pick([a, b], PROMPT, None, "chat", NOW, kv={"a": 5, "b": 9})
    assert (chosen.id, why) == ("b", "kv")


def test_kv_beats_the_prefix_tree() -> None:
    tree = PrefixTree(max_nodes=1000, ttl=120.0)
    p = picker(tree)
    a, b = replica("a"), replica("b")
    tree.walk(PROMPT).insert("a", NOW)
    chosen, why = p.pick([a, b], PROMPT, None, "chat", NOW, kv={"b": 6})
    assert (chosen.id, why) == ("b", "kv")


def test_under_min_blocks_falls_to_tier_one() -> None:
    tree = PrefixTree(max_nodes=1000, ttl=120.0)
    p = picker(tree)
    a, b = replica("a"), replica("b")
    tree.walk(PROMPT).insert("a", NOW)
    chosen, why = p.pick([a, b], PROMPT, None, "chat", NOW, kv={"b": 3})
    assert (chosen.id, why) == ("a", "prefix")


def test_imbalance_overrides_the_index() -> None:
    a, b = replica("a"), replica("b", inflight=40)
    chosen, why = picker().pick([a, b], PROMPT, None, "chat", NOW, kv={"b": 50})
    assert (chosen.id, why) == ("a", "load")


def test_equal_holders_go_to_the_less_loaded() -> None:
    a, b, c = replica("a", inflight=2), replica("b", inflight=1), replica("c")
    chosen, why = picker().pick([a, b, c], PROMPT, None, "chat", NOW, kv={"a": 8, "b": 8})
    assert (chosen.id, why) == ("b", "kv")


def _silent_server() -> tuple[socket.socket, int]:
    """A listener that accepts and never answers: a replica too slow to tokenize."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock, sock.getsockname()[1]


def test_a_tokenize_that_runs_out_of_time_leaves_routing_to_tier_one() -> None:
    sock, port = _silent_server()

    async def run() -> tuple[dict[str, int] | None, int]:
        registry = EndpointRegistry(_CLIENT, 3, 10.0)
        registry.publish(
            [
                EndpointSpec(
                    id="slow", url=f"http://127.0.0.1:{port}", models=("m",), kv_events="tcp://127.0.0.1:1"
                )
            ]
        )
        kv = KVRouting(registry, KVRules(tokenize_timeout_s=0.05, min_blocks=4, max_blocks=4096))
        await kv.sync()
        kv.index.apply("slow", Batch(seq=0, ts=0.0, events=(Stored((1, 2, 3), None),)))
        body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}]}
        request = parse_request(Kind.CHAT, orjson.dumps(body))
        try:
            return await kv.lengths(registry.all(), request), kv.fallbacks
        finally:
            await kv.close()

    try:
        lengths, fallbacks = asyncio.run(run())
    finally:
        sock.close()
    assert lengths is None
    assert fallbacks == 1

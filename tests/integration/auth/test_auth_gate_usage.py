"""Usage accounting at the seam, on a real store: one record per request with who,
what, where and how long, written in batches; five-minute sums beside them that
retention never prunes; per-tenant and per-tag metrics."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from auth_store_helpers import Clock, make_key, make_tree, opened, started_gate
from prometheus_client import CollectorRegistry, generate_latest

from llmgw.auth import UsageEvent, parse_tags

NOW = 1_800_000_010.0
DAY = 86_400.0


@dataclass
class Record:
    """The request path's record (llmgw.router.usage.UsageRecord's fields)."""

    request_id: str
    model: str
    endpoint: str
    status: int
    stream: bool
    started: float
    first_byte: float | None
    finished: float


@dataclass
class Tokens:
    prompt: int
    completion: int


def test_records_sums_and_metrics(store_location: str) -> None:
    async def scenario() -> None:
        async with opened(store_location) as store:
            await make_tree(store)
            key = await make_key(store, NOW)
        clock = Clock(NOW)
        async with started_gate(
            store_location,
            clock,
            pricing={"m1": {"prompt_per_1k": 2000, "completion_per_1k": 4000}},
            batch_size=3,
            router={"tenant_label": "project", "tag_labels": ["run"]},
        ) as gate:
            p = await gate.authenticate(f"Bearer {key}", NOW)
            tags = parse_tags("run=nightly", {"team": "search"})
            for i in range(7):
                record = Record(f"req-{i}", "m1", "replica-a", 200 if i else 503, True, 100.0, 100.2, 101.5)
                gate.record(
                    UsageEvent.from_record(
                        record, Tokens(100, 50), principal=p, tags=tags, queue_s=0.25, finished_at=NOW + i
                    )
                )
            await gate.writer.settle(10)
            assert gate.writer.counts.written == 7
            assert gate.writer.counts.batches >= 3
            registry = CollectorRegistry()
            registry.register(gate.collector)
            page = generate_latest(registry).decode()
            assert 'llmgw_tenant_requests_total{model="m1",project="p",status="2xx"} 6.0' in page
            assert 'llmgw_tagged_requests_total{tag="run",value="nightly"} 7.0' in page
            assert "llmgw_usage_records_written_total 7.0" in page
        async with opened(store_location) as store:
            [newest, *_] = await store.usage.records(limit=10)
            assert newest["request_id"] == "req-6"
            assert (newest["key_id"], newest["project_id"], newest["team_id"], newest["org_id"]) == (
                p.key_id,
                "p",
                "t",
                "o",
            )
            assert (newest["model"], newest["replica"], newest["status"], newest["stream"]) == (
                "m1",
                "replica-a",
                200,
                True,
            )
            assert (newest["prompt_tokens"], newest["completion_tokens"], newest["cost_micros"]) == (
                100,
                50,
                400,
            )
            assert (newest["queue_s"], round(newest["ttft_s"], 3), newest["duration_s"]) == (0.25, 0.2, 1.5)
            assert newest["tags"] == {"team": "search", "run": "nightly"}
            by_model = await store.usage.totals("model", since=NOW - 600)
            assert [(t.group, t.requests, t.errors, t.cost_micros) for t in by_model] == [("m1", 7, 1, 2800)]
            by_key = await store.usage.totals("key", since=NOW - 600)
            assert [t.group for t in by_key] == [p.key_id]

    asyncio.run(scenario())


def test_retention_prunes_records_never_sums(store_location: str) -> None:
    async def scenario() -> None:
        async with opened(store_location) as store:
            await make_tree(store)
            key = await make_key(store, NOW)
        clock = Clock(NOW)
        async with started_gate(store_location, clock, usage_retention=DAY) as gate:
            p = await gate.authenticate(f"Bearer {key}", NOW)
            for i, when in enumerate((NOW, NOW + 1.5 * DAY)):
                gate.record(UsageEvent(f"r{i}", "m1", "rep", 200, False, 10, 5, 0.0, 1.0, None, when, p))
            await gate.writer.settle(10)
            clock.now = NOW + 2 * DAY
            await gate.prune()
        async with opened(store_location) as store:
            assert [r["request_id"] for r in await store.usage.records(limit=10)] == ["r1"]
            [total] = await store.usage.totals("project", since=NOW - 600)
            assert (total.requests, total.prompt_tokens) == (2, 20)

    asyncio.run(scenario())

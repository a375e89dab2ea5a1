"""Usage accounting at the seam, on a real store: one record per request with who,
what, where and how long, written in batches; five-minute sums beside them that
retention never prunes; per-tenant and per-tag metrics."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa
from auth_store_helpers import Clock, finished, make_key, make_tree, opened, started_gate
from prometheus_client import CollectorRegistry, generate_latest

from llmgw.auth import parse_tags
from llmgw.store import schema

NOW = 1_800_000_010.0
DAY = 86_400.0
BUCKET = 1_800_000_000  # the five-minute bucket NOW is in


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
                request = finished(
                    p,
                    f"req-{i}",
                    status=200 if i else 503,
                    prompt=100,
                    completion=50,
                    tags=tags,
                    queued_s=0.25,
                    stream=True,
                    started=100.0,
                    first_byte=100.2,
                    ended=101.5,
                )
                # One hand-over each, finishing a second apart.
                gate.record_many([request], NOW + i - 101.5)
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
                gate.record_many([finished(p, f"r{i}", prompt=10, completion=5, ended=1.0)], when - 1.0)
            await gate.writer.settle(10)
            clock.now = NOW + 2 * DAY
            await gate.prune()
        async with opened(store_location) as store:
            assert [r["request_id"] for r in await store.usage.records(limit=10)] == ["r1"]
            [total] = await store.usage.totals("project", since=NOW - 600)
            assert (total.requests, total.prompt_tokens) == (2, 20)

    asyncio.run(scenario())


def test_a_hand_over_is_recorded_per_request_and_summed_per_bucket_caller_and_model(
    store_location: str,
) -> None:
    async def scenario() -> None:
        async with opened(store_location) as store:
            await make_tree(store)
            project_key = await make_key(store, NOW)
            personal_key = await make_key(store, NOW, user_id="u")
        pricing = {
            "m1": {"prompt_per_1k": 1000, "completion_per_1k": 2000},
            "m2": {"prompt_per_1k": 3000, "completion_per_1k": 0},
        }
        async with started_gate(store_location, Clock(NOW), pricing=pricing) as gate:
            p = await gate.authenticate(f"Bearer {project_key}", NOW)
            u = await gate.authenticate(f"Bearer {personal_key}", NOW)
            # Monotonic times are seconds into BUCKET (the hand-over's offset).
            gate.record_many(
                [
                    finished(p, "p-m1", prompt=1500, completion=500, ended=10.0),
                    finished(p, "p-m1-503", status=503, usage=False, ended=20.0),
                    finished(None, "auth-off", prompt=999, completion=999, ended=25.0),
                    finished(p, "p-m2", model="m2", prompt=100, completion=10, ended=30.0),
                    finished(u, "u-m1-a", prompt=10, completion=20, ended=40.0),
                    finished(p, "p-m1-next-bucket", prompt=1000, ended=310.0),
                    finished(u, "u-m1-b", prompt=30, ended=50.0),
                ],
                BUCKET,
            )
            await gate.writer.settle(10)
            assert (gate.writer.counts.written, gate.writer.counts.dropped) == (6, 0)
        async with opened(store_location) as store:
            records = await store.usage.records(limit=10)
            columns = ("key_id", "user_id", "project_id", "team_id", "org_id")
            got = {
                r["request_id"]: (
                    r["ts"],
                    *(r[c] for c in columns),
                    r["model"],
                    r["status"],
                    r["prompt_tokens"],
                    r["completion_tokens"],
                    r["cost_micros"],
                )
                for r in records
            }
            as_p = (p.key_id, None, "p", "t", "o")
            as_u = (u.key_id, "u", None, None, None)
            # Cost in micro-units, priced per thousand tokens: 1500 x 1000 + 500 x 2000 = 2500.
            assert got == {
                "p-m1": (BUCKET + 10.0, *as_p, "m1", 200, 1500, 500, 2500),
                "p-m1-503": (BUCKET + 20.0, *as_p, "m1", 503, 0, 0, 0),
                "p-m2": (BUCKET + 30.0, *as_p, "m2", 200, 100, 10, 300),
                "u-m1-a": (BUCKET + 40.0, *as_u, "m1", 200, 10, 20, 50),
                "p-m1-next-bucket": (BUCKET + 310.0, *as_p, "m1", 200, 1000, 0, 1000),
                "u-m1-b": (BUCKET + 50.0, *as_u, "m1", 200, 30, 0, 30),
            }
            async with store.engine.connect() as conn:
                sums = {tuple(row) for row in await conn.execute(sa.select(schema.usage_sums))}
            p_sums, u_sums = ("o", "t", "p", "", p.key_id), ("", "", "", "u", u.key_id)
            # bucket, org, team, project, user, key, model: requests, errors, tokens, cost.
            assert sums == {
                (BUCKET, *p_sums, "m1", 2, 1, 1500, 500, 2500),
                (BUCKET, *p_sums, "m2", 1, 0, 100, 10, 300),
                (BUCKET + 300, *p_sums, "m1", 1, 0, 1000, 0, 1000),
                (BUCKET, *u_sums, "m1", 2, 0, 40, 20, 80),
            }

    asyncio.run(scenario())

"""Admission as the gateway builds it from settings: the rules in plain numbers (the
seed's bands, the total that defaults to half the bands' capacities), the SLO objectives
from the catalog fed by finished requests, and the metric families it exports."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from llmgw.config import settings_from_mapping
from llmgw.errors import NoCapacity
from llmgw.router.admission import BandRule
from llmgw.router.usage import Tokens, UsageRecord
from llmgw.server.gateway import Gateway

ENDPOINTS = [{"id": "r1", "url": "http://127.0.0.1:9", "models": ["m"]}]


def build(router: dict[str, Any] | None = None, **extra: Any) -> Gateway:
    document = {"endpoints": ENDPOINTS, "router": router or {}, **extra}
    return Gateway(settings_from_mapping(document, source="test", environ={}), clock=lambda: 1000.0)


def samples(gateway: Gateway) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(gateway.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_default_rules_are_the_seeds() -> None:
    gateway = build()
    rules = gateway.flow.rules
    assert rules.enabled
    assert rules.bands == (
        BandRule("platinum", 400, 1.00),
        BandRule("gold", 300, 0.85),
        BandRule("silver", 200, 0.60),
        BandRule("bronze", 100, 0.30),
    )
    assert rules.default_band == "gold"
    assert rules.queue_ttl == 30.0
    assert rules.per_band == 2000
    assert rules.total == 4000  # 0: half the four bands' 2000 each
    assert rules.interval == pytest.approx(0.01)
    assert rules.activation_wait == 120.0
    gateway.close()


def test_settings_become_the_rules_in_seconds_and_counts() -> None:
    gateway = build(
        {
            "activation_wait": "3s",
            "admission": {
                "queue_ttl": "500ms",
                "queue_capacity_per_band": 10,
                "queue_capacity_total": 7,
                "interval": "50ms",
                "default_band": "bronze",
            },
        }
    )
    rules = gateway.flow.rules
    assert (rules.queue_ttl, rules.per_band, rules.total, rules.interval) == (0.5, 10, 7, 0.05)
    assert rules.default_band == "bronze"
    assert rules.activation_wait == 3.0
    assert gateway.flow.band(None).name == "bronze"
    gateway.close()


def test_a_zero_total_is_half_of_the_declared_bands_capacities() -> None:
    bands = [
        {"name": "high", "priority": 2, "saturation_ceiling": 1.0},
        {"name": "low", "priority": 1, "saturation_ceiling": 0.5},
    ]
    gateway = build({"admission": {"bands": bands, "default_band": "low", "queue_capacity_per_band": 30}})
    assert gateway.flow.rules.total == 30
    gateway.close()


def _record(status: int = 200, first_byte: float | None = 0.9) -> UsageRecord:
    """A request that started at 998 s on the gateway's clock and finished at 999.9 s."""
    return UsageRecord(
        "r", "m", "r1", status, True, None, 998.0, None if first_byte is None else 998.0 + first_byte, 999.9
    )


def test_finished_streams_feed_the_slo_tracker() -> None:
    gateway = build(models=[{"name": "m", "slo": {"ttft_p99": "500ms", "tpot_p99": "200ms"}}])
    gateway._observe_latency(
        [(_record(first_byte=0.4), Tokens(prompt=5, completion=11))]
    )  # 0.4 s, 0.15 s/token
    assert not gateway.slo.breached("m", 1000.0)
    gateway.close()
    slow_first = build(models=[{"name": "m", "slo": {"ttft_p99": "500ms"}}])
    slow_first._observe_latency([(_record(first_byte=0.9), None)])
    assert slow_first.slo.breached("m", 1000.0)
    slow_first.close()
    slow_tokens = build(models=[{"name": "m", "slo": {"tpot_p99": "50ms"}}])
    slow_tokens._observe_latency([(_record(first_byte=0.1), Tokens(prompt=5, completion=11))])  # 0.18 s/token
    assert slow_tokens.slo.breached("m", 1000.0)
    slow_tokens.close()


@pytest.mark.parametrize(
    "record", [_record(status=502), _record(first_byte=None)], ids=["failed", "not-streamed"]
)
def test_failed_or_unstreamed_requests_are_not_latency_samples(record: UsageRecord) -> None:
    gateway = build(models=[{"name": "m", "slo": {"ttft_p99": "1ms"}}])
    gateway._observe_latency([(record, Tokens(prompt=5, completion=11))])
    assert not gateway.slo.breached("m", 1000.0)
    gateway.close()


def test_admission_metrics_are_exported_by_model_and_band() -> None:
    async def test() -> None:
        gateway = build({"scoring": {"target_inflight": 1}, "admission": {"queue_capacity_per_band": 1}})
        flow = gateway.flow
        endpoint = gateway.endpoints.all()[0]
        assert flow.admit_now("m", flow.band("gold"))
        flow.dispatched("m")
        endpoint.inflight = 1
        waiting = asyncio.ensure_future(flow.wait("m", flow.band("silver")))
        await asyncio.sleep(0)
        with pytest.raises(NoCapacity, match="queue_capacity_per_band"):
            await flow.wait("m", flow.band("silver"))
        out = samples(gateway)
        m_silver = (("band", "silver"), ("model", "m"))
        assert out[("llmgw_admission_queue_depth", m_silver)] == 1
        assert out[("llmgw_admission_admitted_total", (("band", "gold"), ("model", "m")))] == 1
        assert out[("llmgw_admission_queued_total", m_silver)] == 1
        assert out[("llmgw_admission_shed_total", m_silver)] == 1
        endpoint.inflight = 0
        assert flow.release() == 1
        await waiting
        out = samples(gateway)
        assert out[("llmgw_admission_queue_depth", m_silver)] == 0
        assert out[("llmgw_admission_admitted_total", m_silver)] == 1
        assert out[("llmgw_admission_wait_seconds_count", m_silver)] == 1
        gateway.close()

    asyncio.run(test())


def test_expired_requests_are_counted() -> None:
    async def test() -> None:
        now = [1000.0]
        settings = settings_from_mapping(
            {"endpoints": ENDPOINTS, "router": {"scoring": {"target_inflight": 1}}}, source="t", environ={}
        )
        gateway = Gateway(settings, clock=lambda: now[0])
        gateway.endpoints.all()[0].inflight = 1
        waiting = asyncio.ensure_future(gateway.flow.wait("m", gateway.flow.band("bronze")))
        await asyncio.sleep(0)
        now[0] += 30.0
        gateway.flow.release()
        await asyncio.gather(waiting, return_exceptions=True)
        assert samples(gateway)[("llmgw_admission_expired_total", (("band", "bronze"), ("model", "m")))] == 1
        gateway.close()

    asyncio.run(test())


def test_the_queue_wait_is_exported_by_model_and_band() -> None:
    async def test() -> None:
        gateway = build({"scoring": {"target_inflight": 1}})
        gateway.endpoints.all()[0].inflight = 1
        waiting = asyncio.ensure_future(gateway.flow.wait("m", gateway.flow.band("gold")))
        await asyncio.sleep(0)
        gateway.endpoints.all()[0].inflight = 0
        gateway.flow.release()
        await waiting
        out = samples(gateway)
        gateway.close()
        assert out[("llmgw_admission_wait_seconds_count", (("band", "gold"), ("model", "m")))] == 1

    asyncio.run(test())

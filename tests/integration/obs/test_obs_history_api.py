"""`GET /api/history` through `llmgw server` (auth on, so the admin API is served) whose
`monitoring.prometheus` is a stand-in Prometheus on loopback: behind the admin token,
every panel's series in the answer; and every series the panels' queries name is one
the gateway's own /metrics page exports."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmgw.obs.history import PANELS
from llmgw.testing.server import GatewayProcess, running_gateway
from llmgw.testing.sim import SimEngineProcess
from support.prometheus import StandIn, stand_in_prometheus
from support.sims import endpoint, sim

_SAMPLE_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


@pytest.fixture(scope="module")
def prometheus() -> Iterator[StandIn]:
    with stand_in_prometheus() as stand_in:
        yield stand_in


@pytest.fixture(scope="module")
def gateway(prometheus: StandIn, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    engine: SimEngineProcess = sim("--model", "m")
    store: Path = tmp_path_factory.mktemp("history") / "llmgw.db"
    config = {
        "auth": {"enabled": True, "store": str(store)},
        "endpoints": [endpoint("e", engine, "m")],
        "monitoring": {"prometheus": prometheus.url, "window": "30m", "timeout": "2s"},
    }
    try:
        with running_gateway(config, timeout=60) as process:
            yield process
    finally:
        engine.stop()


def test_history_needs_the_admin_token(gateway: GatewayProcess) -> None:
    answer = httpx.get(gateway.admin_url + "/api/history", timeout=10)
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "invalid_admin_token"


def test_history_answers_every_panel_from_prometheus(gateway: GatewayProcess, prometheus: StandIn) -> None:
    asked_before = len(prometheus.queries)
    answer = httpx.get(
        gateway.admin_url + "/api/history",
        headers={"authorization": f"Bearer {gateway.admin_token()}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["available"] is True
    assert body["step_s"] == 15
    assert body["end"] - body["start"] == 30 * 60
    assert [p["key"] for p in body["panels"]] == [p.key for p in PANELS]
    for panel in body["panels"]:
        assert panel["problem"] is None
        assert {s["labels"]["model"] for s in panel["series"]} == {"m", "other"}
        assert all(len(point) == 2 for s in panel["series"] for point in s["points"])
    assert len(prometheus.queries) - asked_before == sum(len(p.queries) for p in PANELS)


def test_the_panels_name_only_series_the_gateway_exports(gateway: GatewayProcess) -> None:
    page = httpx.get(gateway.admin_url + "/metrics", timeout=10).text
    exported = {
        family.name + suffix
        for family in text_string_to_metric_families(page)
        for suffix in _SAMPLE_SUFFIXES.get(family.type, ("",))
    }
    named = {name for p in PANELS for q in p.queries for name in re.findall(r"\bllmgw_[a-z_]+", q.promql)}
    assert named, "the panels name no llmgw series"
    assert named <= exported, sorted(named - exported)

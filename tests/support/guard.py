"""Helpers for guard tests: a config with one default policy, the guard's counters."""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from llmgw.testing.server import GatewayProcess
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint


def guarded_config(engine: SimEngineProcess, checks: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """Static config: the sim as `chat-model`, policy `p` with `checks` as the default."""
    return {
        "endpoints": [endpoint("echo", engine, "chat-model")],
        "models": [{"name": "chat-model"}],
        "guard": {"default": "p", "policies": [{"name": "p", "checks": checks}]},
        **extra,
    }


def guard_checks(gateway: GatewayProcess) -> dict[tuple[str, ...], float]:
    """llmgw_guard_checks_total by (policy, check, stage, action, verdict)."""
    text = httpx.get(gateway.admin_url + "/metrics", timeout=5).text
    out: dict[tuple[str, ...], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "llmgw_guard_checks_total":
                labels = sample.labels
                key = tuple(labels[k] for k in ("policy", "check", "stage", "action", "verdict"))
                out[key] = sample.value
    return out

"""The Grafana dashboard and Prometheus rules shipped under deploy/, read for tests:
their PromQL expressions, and the metric names those name, matched to the families a
server exports (a counter's `_total`, a histogram's `_bucket`, `_sum` and `_count`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "llmgw-dashboard.json"
RULES = ROOT / "deploy" / "prometheus" / "llmgw-alerts.yml"

# Every series llmgw exports starts with one of these (process_* from prometheus_client).
_NAME = re.compile(r"\b(?:llmgw|process)_[a-z0-9_]+\b")
_SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def rules() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(RULES.read_text())
    return loaded


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    out: list[dict[str, Any]] = []
    for panel in board["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def dashboard_exprs() -> list[str]:
    board = dashboard()
    exprs = [t["expr"] for p in panels(board) for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in board["templating"]["list"] if isinstance(v.get("query"), dict)]
    return exprs


def rule_exprs() -> list[str]:
    return [rule["expr"] for group in rules()["groups"] for rule in group["rules"]]


def metric_names(expr: str) -> set[str]:
    return set(_NAME.findall(expr))


def family_of(name: str, families: Iterable[str]) -> str | None:
    """The exported family a name in an expression is a sample of, or None."""
    known = set(families)
    if name in known:
        return name
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in known:
            return name[: -len(suffix)]
    return None

"""The operator files under deploy/: the Prometheus rules parse, have what an alert
needs, and pass `promtool check rules` where promtool is installed; the Grafana
dashboard is a JSON model Grafana imports (schema version, panels with a Prometheus
data source chosen by the `datasource` variable, a query in every target). That their
expressions name only series llmgw exports is checked against a real server's page in
tests/integration/control/test_control_metrics_page.py."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter

import pytest

from support.deploy_files import RULES, dashboard, dashboard_exprs, metric_names, panels, rule_exprs, rules

_DURATION = re.compile(r"^\d+[smhd]$")
ALERTS = {
    "LlmgwModelBelowMinReplicas",
    "LlmgwNodeLost",
    "LlmgwNodeUnreachable",
    "LlmgwHighErrorRate",
    "LlmgwTtftSloBreached",
    "LlmgwBudgetNearLimit",
}


def test_every_rule_is_an_alert_with_a_duration_severity_and_summary() -> None:
    loaded = rules()
    assert set(loaded) == {"groups"}
    seen: list[str] = []
    for group in loaded["groups"]:
        assert group["name"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
            seen.append(rule["alert"])
            assert isinstance(rule["expr"], str)
            assert rule["expr"].strip()
            assert _DURATION.match(rule["for"]), rule["alert"]
            assert rule["labels"]["severity"] in ("warning", "critical")
            assert rule["annotations"]["summary"]
            assert rule["annotations"]["description"]
    assert [name for name, n in Counter(seen).items() if n > 1] == []
    assert set(seen) == ALERTS


def test_the_rules_file_says_why_there_is_no_backup_alert() -> None:
    text = RULES.read_text()
    assert "backup" not in " ".join(rule["alert"].lower() for g in rules()["groups"] for rule in g["rules"])
    assert 'No "backup stale" alert' in text


def test_promtool_accepts_the_rules() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not on PATH (Debian: apt-get install prometheus): the rules are only parsed")
    done = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in done.stdout


def test_the_dashboard_is_a_grafana_json_model_on_a_prometheus_variable() -> None:
    board = dashboard()
    assert isinstance(board["schemaVersion"], int)
    assert board["schemaVersion"] >= 36
    assert board["title"]
    assert board["uid"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    every = panels(board)
    ids = [p["id"] for p in every]
    assert len(ids) == len(set(ids))
    graphs = [p for p in every if p["type"] != "row"]
    assert len(graphs) >= 10
    for panel in graphs:
        assert panel["type"] in ("timeseries", "stat"), panel["title"]
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["expr"], panel["title"]
            assert target["refId"], panel["title"]
            assert target["datasource"]["uid"] == "${datasource}"


def test_the_dashboard_has_the_panels_an_operator_looks_for() -> None:
    titles = " | ".join(p["title"].lower() for p in panels(dashboard()))
    for wanted in (
        "requests",
        "by reason",
        "time to first token",
        "time per output token",
        "admission by band",
        "desired and ready",
        "nodes by state",
        "spend",
    ):
        assert wanted in titles, wanted


def test_every_expression_names_a_series() -> None:
    for expr in dashboard_exprs() + rule_exprs():
        assert metric_names(expr), expr
    exprs = " ".join(dashboard_exprs())
    for quantile in ("0.5", "0.95", "0.99"):
        for histogram in ("llmgw_time_to_first_token_seconds", "llmgw_time_per_output_token_seconds"):
            assert f"histogram_quantile({quantile}, sum by (le) (rate({histogram}_bucket" in exprs

"""The /metrics page of a whole deployment: `llmgw server` with auth on and its control
plane, one agent starting sim engines. Parsed with prometheus_client's parser: every
family once, with help and type; the gateway's, the process's, the build's, the control
plane's and the replicas' families all there; and every metric the shipped Grafana
dashboard and Prometheus rules (deploy/) query is one this page exports."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from control_helpers import Cluster, cluster, server_config, sim_model, wait_for
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from llmgw.testing.server import start_gateway
from support.deploy_files import dashboard_exprs, family_of, metric_names, rule_exprs

pytestmark = pytest.mark.slow


class Deployment:
    def __init__(self, c: Cluster, token: str) -> None:
        self.cluster = c
        self.server = c.server
        self.http = httpx.Client(timeout=30)
        self.token = token

    def admin(self, path: str, body: dict[str, Any]) -> Any:
        answer = self.http.post(
            self.server.admin_url + path, json=body, headers={"authorization": f"Bearer {self.token}"}
        )
        assert answer.status_code < 300, answer.text
        return answer.json()

    def page(self) -> str:
        answer = self.http.get(self.server.admin_url + "/metrics")
        assert answer.status_code == 200
        return answer.text

    def samples(self) -> list[Sample]:
        return [s for family in text_string_to_metric_families(self.page()) for s in family.samples]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("metrics-page")
    with cluster(tmp) as c:
        c.start_agent("n1")
        chat = sim_model("chat", min=1, slo={"ttft_p99": "5s", "tpot_p99": "500ms"})
        # Wants more cores than any machine has: never placed, a placement failure each pass.
        huge = sim_model("huge", cores=4096, min=1)
        config = server_config(c.agent_port, chat, huge)
        config["auth"] = {
            "enabled": True,
            "store": str(Path(tmp) / "llmgw.db"),
            "default_price": {"prompt_per_1k": 1000, "completion_per_1k": 2000},
        }
        token_file = Path(tmp) / "secrets" / "admin-token"
        config["admin_token_file"] = str(token_file)
        c.servers.append(start_gateway(config, timeout=60))
        made = Deployment(c, token_file.read_text().strip())
        try:
            yield made
        finally:
            made.http.close()


@pytest.fixture(scope="module")
def served(deployment: Deployment) -> Deployment:
    """The deployment once a replica of chat answered a key with a budget, and the
    router has scraped that replica."""
    d = deployment
    d.admin("/api/orgs", {"id": "o"})
    d.admin("/api/teams", {"id": "t", "org": "o"})
    d.admin("/api/projects", {"id": "p", "team": "t", "budget": 100})
    key = d.admin("/api/keys", {"project": "p"})["key"]

    def answered() -> bool:
        answer = d.http.post(
            d.server.base_url + "/chat/completions",
            json={"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
            headers={"authorization": f"Bearer {key}"},
            timeout=90,
        )
        return answer.status_code == 200

    wait_for(answered, 120, f"chat answered through the gateway\n{d.cluster.logs()}", pause=0.5)
    with d.http.stream(
        "POST",
        d.server.base_url + "/chat/completions",
        json={"model": "chat", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": f"Bearer {key}"},
    ) as stream:
        assert stream.status_code == 200
        b"".join(stream.iter_bytes())
    wait_for(
        lambda: any(s.name == "llmgw_endpoint_kv_usage" for s in d.samples()),
        60,
        "the router scraped chat's replica",
        pause=0.2,
    )
    wait_for(
        lambda: any(s.name == "llmgw_spend_total" and s.value > 0 for s in d.samples()),
        60,
        "the answers' usage accounted",
        pause=0.2,
    )
    return d


def test_every_family_appears_once_with_help_and_type(served: Deployment) -> None:
    page = served.page()
    families = list(text_string_to_metric_families(page))
    assert [name for name, n in Counter(f.name for f in families).items() if n > 1] == []
    for kind in ("HELP", "TYPE"):
        declared = Counter(line.split()[2] for line in page.splitlines() if line.startswith(f"# {kind} "))
        assert [name for name, n in declared.items() if n > 1] == [], kind
        assert sum(declared.values()) == len(families), kind  # one of each per family
    for family in families:
        assert family.documentation, family.name
        assert family.type != "unknown", family.name


def test_the_families_an_operator_needs_are_there(served: Deployment) -> None:
    names = {s.name for s in served.samples()}
    for wanted in (
        "llmgw_requests_total",
        "llmgw_time_to_first_token_seconds_bucket",
        "llmgw_time_per_output_token_seconds_bucket",
        "llmgw_usage_records_dropped_total",  # the auth store's buffer
        "llmgw_usage_queue_dropped_total",  # the gateway's accounting queue
        "llmgw_spend_total",
        "llmgw_budget_limit",
        "llmgw_budget_spent",
        "llmgw_slo_objective_seconds",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "llmgw_build_info",
        "llmgw_control_nodes",
        "llmgw_control_replicas",
        "llmgw_control_replicas_desired",
        "llmgw_control_replicas_ready",
        "llmgw_control_placement_failures_total",
        "llmgw_control_reconcile_duration_seconds_bucket",
        "llmgw_control_leader",
        "llmgw_control_agent_connections",
        "llmgw_endpoint_waiting",
        "llmgw_endpoint_kv_usage",
    ):
        assert wanted in names, wanted


def test_the_control_plane_series_say_what_the_plane_holds(served: Deployment) -> None:
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in served.samples()}
    assert values[("llmgw_control_leader", ())] == 1
    assert values[("llmgw_control_agent_connections", ())] == 1
    assert values[("llmgw_control_nodes", (("state", "ready"),))] == 1
    assert values[("llmgw_control_replicas", (("model", "chat"), ("state", "ready")))] == 1
    assert values[("llmgw_control_replicas_desired", (("model", "chat"),))] == 1
    assert values[("llmgw_control_replicas_ready", (("model", "chat"),))] == 1
    assert values[("llmgw_control_replicas_desired", (("model", "huge"),))] == 1
    assert values[("llmgw_control_replicas_ready", (("model", "huge"),))] == 0
    failures = ("llmgw_control_placement_failures_total", (("model", "huge"), ("reason", "cores")))
    assert values[failures] >= 1
    assert values[("llmgw_control_reconcile_duration_seconds_count", ())] >= 1
    replica = next(s.labels["endpoint"] for s in served.samples() if s.name == "llmgw_endpoint_kv_usage")
    assert replica.startswith("chat-")
    assert values[("llmgw_budget_limit", (("period", "month"), ("scope", "project:p")))] == 100
    build = next(s for s in served.samples() if s.name == "llmgw_build_info")
    assert build.labels["version"]
    assert build.labels["python"]


def test_the_dashboard_and_the_rules_query_only_series_the_server_exports(served: Deployment) -> None:
    families = {f.name for f in text_string_to_metric_families(served.page())}
    for source, exprs in (("dashboard", dashboard_exprs()), ("rules", rule_exprs())):
        used = {name for expr in exprs for name in metric_names(expr)}
        assert used, source
        missing = sorted(name for name in used if family_of(name, families) is None)
        assert missing == [], f"{source} queries series no llmgw server exports: {missing}"

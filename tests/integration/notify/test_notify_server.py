"""`llmgw server` with a webhook, a real agent and a receiver on loopback: an agent that
dies brings a signed node.unreachable and then node.lost, which the receiver verifies
with the secret; `llmgw ctl notify test` and `log` through the CLI; and a secret reference
that cannot be read stops the start with one sentence.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from integration.control.control_helpers import (
    Cluster,
    clean_env,
    cluster,
    server_config,
    sim_model,
    wait_for,
)
from llmgw.notify.signing import SIGNATURE_HEADER, verify
from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.webhook import WebhookReceiver, receiver

pytestmark = pytest.mark.slow

SECRET = "whsec-integration"


@pytest.fixture
def rx() -> Iterator[WebhookReceiver]:
    yield from receiver()


def _ctl(server: GatewayProcess, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "llmgw",
            "ctl",
            "--admin",
            server.admin_url,
            "--token",
            token,
            "notify",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        check=False,
    )


def _start(nodes: Cluster, tmp: Path, rx: WebhookReceiver) -> GatewayProcess:
    secret_file = tmp / "webhook-secret"
    secret_file.write_text(SECRET + "\n")
    config: dict[str, Any] = server_config(
        nodes.agent_port, sim_model("idle", min=0), unreachable_after="2s", lost_after="4s"
    )
    config["admin_token_file"] = str(tmp / "secrets" / "admin-token")
    config["notify"] = {"webhooks": [{"name": "ops", "url": rx.url, "secret_file": str(secret_file)}]}
    server = start_gateway(config, timeout=60)
    nodes.servers.append(server)
    return server


def test_a_lost_node_reaches_the_receiver_signed_and_the_cli_tests_and_logs(
    tmp_path: Path, rx: WebhookReceiver
) -> None:
    with cluster(tmp_path) as nodes:
        server = _start(nodes, tmp_path, rx)
        token = (tmp_path / "secrets" / "admin-token").read_text().strip()
        agent = nodes.start_agent("n1")
        wait_for(lambda: _nodes(server, token), 60, "n1 registered")
        agent.kill()
        rx.wait_for(lambda: rx.events("node.lost"), 60, "node.lost delivered")
        [unreachable] = rx.events("node.unreachable")
        [lost] = rx.events("node.lost")
        assert rx.received.index(unreachable) < rx.received.index(lost)
        assert lost.event["data"]["node"] == "n1"
        # What a receiver does: the header checked against the raw body and its own clock.
        assert verify(SECRET.encode(), lost.body, lost.headers[SIGNATURE_HEADER.lower()], now=time.time())
        assert not verify(
            b"not-the-secret", lost.body, lost.headers[SIGNATURE_HEADER.lower()], now=time.time()
        )

        tested = _ctl(server, token, "test", "ops")
        assert tested.returncode == 0, tested.stderr
        assert "ops took the test event: HTTP 200" in tested.stdout
        [test_event] = rx.events("notify.test")
        assert verify(
            SECRET.encode(), test_event.body, test_event.headers[SIGNATURE_HEADER.lower()], now=time.time()
        )

        rx.status = 500
        refused = _ctl(server, token, "test", "ops")
        assert refused.returncode == 1
        assert "ops did not take the test event: HTTP 500" in refused.stderr
        unknown = _ctl(server, token, "test", "nobody")
        assert unknown.returncode == 2
        assert "no webhook is named 'nobody'" in unknown.stderr
        assert "Traceback" not in unknown.stderr + refused.stderr

        logged = _ctl(server, token, "log", "--webhook", "ops", "--json")
        assert logged.returncode == 0, logged.stderr
        rows = json.loads(logged.stdout)
        by_type = {(row["type"], row["state"]) for row in rows}
        assert {("node.unreachable", "delivered"), ("node.lost", "delivered")} <= by_type
        assert {("notify.test", "delivered"), ("notify.test", "failed")} <= by_type
        table = _ctl(server, token, "log", "--limit", "2")
        assert table.returncode == 0, table.stderr
        assert "notify.test" in table.stdout
        # Each event once: the passes after the loss do not send it again.
        assert len(rx.events("node.lost")) == 1
        page = httpx.get(server.admin_url + "/metrics", timeout=10).text
        counted = [line for line in page.splitlines() if line.startswith("llmgw_notify_deliveries_total")]
        assert 'llmgw_notify_deliveries_total{outcome="failed",webhook="ops"} 1.0' in counted, counted
        assert any(
            line.startswith('llmgw_notify_deliveries_total{outcome="delivered",webhook="ops"}')
            for line in counted
        )


def _nodes(server: GatewayProcess, token: str) -> bool:
    answer = httpx.get(
        server.admin_url + "/api/control/nodes", headers={"authorization": f"Bearer {token}"}, timeout=5
    )
    return answer.status_code == 200 and any(n.get("id") == "n1" for n in answer.json()["data"])


def test_a_webhook_secret_that_cannot_be_read_stops_the_start_with_one_sentence(tmp_path: Path) -> None:
    config = {
        "admin_token_file": str(tmp_path / "admin-token"),
        "agent_insecure": True,
        "notify": {
            "webhooks": [
                {"name": "ops", "url": "http://127.0.0.1:9/hook", "secret_file": "env:LLMGW_TEST_NO_SUCH"}
            ]
        },
    }
    path = tmp_path / "llmgw.yaml"
    path.write_text(yaml.safe_dump(config))
    started = subprocess.run(
        [sys.executable, "-m", "llmgw", "server", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        check=False,
    )
    assert started.returncode != 0
    errors = [line for line in started.stderr.splitlines() if "notify.webhooks[0].secret_file" in line]
    assert len(errors) == 1, started.stderr
    assert "LLMGW_TEST_NO_SUCH" in errors[0]
    assert "Traceback" not in started.stderr

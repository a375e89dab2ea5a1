"""Canaries through real processes: `llmgw server` router-only with two sims as static
endpoints, one serving the model, one its candidate. A healthy candidate keeps its
split and gets its share; one failing a fifth of its requests, and one three times as
slow to its first token, are each rolled back on their own, with the decision in the
admin API, `llmgw ctl explain`, the metrics, the log and a webhook; only an operator's
`llmgw ctl model canary-reset` brings the candidate back. Every answer says who served.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import SimEngineProcess, start_sim_engine
from llmgw.testing.webhook import WebhookReceiver, receiver
from support.sims import endpoint, set_quality, sim_state

pytestmark = pytest.mark.slow

MIN_REQUESTS = 20
BUSY_MIN_REQUESTS = 80
CLIENTS = 4
PERCENT = 20
# A first token some 30 ms away on both sides, so the gateway's own jitter on a busy
# machine is small beside it and a healthy candidate's TTFT ratio stays near 1.
SIM_ARGS = ("--decode-ms", "30", "--prefill-ms-per-token", "0.01", "--default-max-tokens", "2")


@dataclass
class Rig:
    model: SimEngineProcess
    candidate: SimEngineProcess
    gateway: GatewayProcess
    hooks: WebhookReceiver


@pytest.fixture
def hooks() -> Iterator[WebhookReceiver]:
    yield from receiver()


def _rig(hooks: WebhookReceiver, *candidate_args: str, min_requests: int = MIN_REQUESTS) -> Iterator[Rig]:
    model = start_sim_engine(*SIM_ARGS, "--model", "chat")
    candidate = start_sim_engine(*SIM_ARGS, "--model", "chat-next", *candidate_args)
    gateway: GatewayProcess | None = None
    try:
        gateway = start_gateway(
            {
                "endpoints": [
                    endpoint("sim-model", model, "chat"),
                    endpoint("sim-next", candidate, "chat-next"),
                ],
                "models": [
                    {
                        "name": "chat",
                        "canary": {"model": "chat-next", "percent": PERCENT, "min_requests": min_requests},
                    },
                    {"name": "chat-next"},
                ],
                "notify": {"webhooks": [{"name": "ops", "url": hooks.url}]},
            }
        )
        yield Rig(model, candidate, gateway, hooks)
    finally:
        if gateway is not None:
            gateway.stop()
        candidate.stop()
        model.stop()


@pytest.fixture
def healthy(hooks: WebhookReceiver) -> Iterator[Rig]:
    yield from _rig(hooks)


@pytest.fixture
def failing(hooks: WebhookReceiver) -> Iterator[Rig]:
    yield from _rig(hooks, "--error-rate", "0.2")


@pytest.fixture
def failing_busy(hooks: WebhookReceiver) -> Iterator[Rig]:
    yield from _rig(hooks, "--error-rate", "0.2", min_requests=BUSY_MIN_REQUESTS)


def _ask(rig: Rig, n: int, session: str | None = None, *, stream: bool = False) -> Counter[str]:
    """Sends `n` chat requests one after another; counts who served them (x-llmgw-model)."""
    served: Counter[str] = Counter()
    headers = {"x-session-id": session} if session else {}
    body = {"model": "chat", "messages": [{"role": "user", "content": "hello"}], "stream": stream}
    with httpx.Client(base_url=rig.gateway.base_url, timeout=30) as client:
        for _ in range(n):
            answer = client.post("/chat/completions", json=body, headers=headers)
            assert answer.status_code == 200, answer.text
            served[answer.headers["x-llmgw-model"]] += 1
    return served


def _admin(rig: Rig, method: str, path: str) -> dict[str, Any]:
    answer = httpx.request(
        method,
        f"{rig.gateway.admin_url}/api/{path}",
        headers={"authorization": f"Bearer {rig.gateway.admin_token()}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _ctl(rig: Rig, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "llmgw",
            "ctl",
            "--admin",
            rig.gateway.admin_url,
            "--token",
            rig.gateway.admin_token(),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
    )


def _rollback_event(rig: Rig) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for received in rig.hooks.received:
            if received.event["type"] == "canary.rolled_back":
                return received.event
        time.sleep(0.1)
    raise AssertionError(f"no canary.rolled_back event reached the webhook: {rig.hooks.received}")


def test_a_healthy_canary_keeps_its_split_and_gets_its_share(healthy: Rig) -> None:
    served = _ask(healthy, 200)
    # Requests without a session are split by their order: exactly 20 % of 200.
    assert served == {"chat-next": 40, "chat": 160}
    assert _ask(healthy, 10, stream=True)["chat-next"] == 2
    assert sim_state(healthy.candidate)["requests_seen"] == 42
    canary = _admin(healthy, "GET", "router/canaries/chat")
    assert (canary["state"], canary["percent_in_force"]) == ("running", PERCENT)
    assert canary["candidate_side"]["requests"] == 42
    assert canary["candidate_side"]["errors"] == 0
    # A conversation stays on one side, whichever that is.
    for session in ("conv-1", "conv-2", "conv-3", "conv-4"):
        assert len(_ask(healthy, 5, session)) == 1


def test_a_candidate_failing_a_fifth_of_its_requests_is_rolled_back(failing: Rig) -> None:
    served = _ask(failing, 150)
    # Each failed try on the candidate was answered by the model: the client saw no error.
    assert sum(served.values()) == 150
    canary = _admin(failing, "GET", "router/canaries/chat")
    assert (canary["state"], canary["percent_in_force"]) == ("rolled_back", 0)
    rollback = canary["rollback"]
    assert rollback["reason"] == "error_rate"
    assert rollback["candidate_side"]["requests"] == MIN_REQUESTS
    assert rollback["candidate_side"]["error_rate"] == pytest.approx(0.2)
    # Bounded: not one request reached the candidate after the decision (the sim's
    # engine counts the requests it served, not the 500s it answered before them).
    errors = rollback["candidate_side"]["errors"]
    assert errors == MIN_REQUESTS // 5
    assert sim_state(failing.candidate)["requests_seen"] + errors == MIN_REQUESTS
    assert _ask(failing, 50) == {"chat": 50}
    assert sim_state(failing.candidate)["requests_seen"] + errors == MIN_REQUESTS

    event = _rollback_event(failing)
    assert event["data"]["model"] == "chat"
    assert event["data"]["candidate"] == "chat-next"
    assert event["data"]["reason"] == "error_rate"
    metrics = httpx.get(failing.gateway.admin_url + "/metrics", timeout=10).text
    assert (
        'llmgw_canary_rollbacks_total{candidate="chat-next",model="chat",reason="error_rate"} 1.0' in metrics
    )
    assert 'llmgw_canary_percent{candidate="chat-next",model="chat"} 0.0' in metrics
    assert "candidate 'chat-next' rolled back" in failing.gateway.log()

    explained = _ctl(failing, "explain", "chat")
    assert explained.returncode == 0, explained.stderr
    assert "canary rolled back at" in explained.stdout
    assert "error rate 20.0%" in explained.stdout
    assert "llmgw ctl model canary-reset chat" in explained.stdout

    set_quality(failing.candidate, error_rate=0)
    reset = _ctl(failing, "model", "canary-reset", "chat")
    assert reset.returncode == 0, reset.stderr
    assert "chat-next gets 20% of its requests again" in reset.stdout
    assert _ask(failing, 50)["chat-next"] == 10
    assert _admin(failing, "GET", "router/canaries/chat")["state"] == "running"


def test_with_clients_sending_together_only_requests_under_way_reach_it_after(failing_busy: Rig) -> None:
    """Bounded: with 4 clients sending at once, the candidate gets at most the requests
    already on their way when the threshold was crossed (under 4), within 5 % of the
    80 it had served."""
    remaining = [400]
    lock = threading.Lock()
    failures: list[str] = []

    def client() -> None:
        with httpx.Client(base_url=failing_busy.gateway.base_url, timeout=30) as http:
            while True:
                with lock:
                    if remaining[0] <= 0:
                        return
                    remaining[0] -= 1
                body = {"model": "chat", "messages": [{"role": "user", "content": "hi"}]}
                answer = http.post("/chat/completions", json=body)
                if answer.status_code != 200:
                    failures.append(answer.text)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert failures == []
    canary = _admin(failing_busy, "GET", "router/canaries/chat")
    decided = canary["rollback"]["candidate_side"]["requests"]
    assert decided == BUSY_MIN_REQUESTS
    # Every generation request the candidate's sim saw, failed ones included.
    seen = sim_state(failing_busy.candidate)["quality"]["requests"]
    assert seen - decided == canary["candidate_tries_after_rollback"]
    assert seen - decided < CLIENTS
    assert seen - decided <= 0.05 * decided


def test_a_candidate_three_times_as_slow_to_its_first_token_is_rolled_back(healthy: Rig) -> None:
    set_quality(healthy.candidate, ttft_factor=3)
    _ask(healthy, 150)
    canary = _admin(healthy, "GET", "router/canaries/chat")
    assert canary["state"] == "rolled_back"
    rollback = canary["rollback"]
    assert rollback["reason"] == "ttft"
    ratio = rollback["candidate_side"]["mean_ttft_s"] / rollback["model_side"]["mean_ttft_s"]
    assert ratio > 1.5
    assert sim_state(healthy.candidate)["requests_seen"] == MIN_REQUESTS
    assert _rollback_event(healthy)["data"]["reason"] == "ttft"


def test_reset_of_a_model_without_a_canary_names_the_ones_with_one(healthy: Rig) -> None:
    refused = _ctl(healthy, "model", "canary-reset", "chat-next")
    assert refused.returncode == 2
    assert "model 'chat-next' has no canary" in refused.stderr
    assert "models with one: chat" in refused.stderr

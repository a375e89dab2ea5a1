"""Two `llmgw server` processes on one PostgreSQL hold a key's limit together, seen by a
client through their client ports.

Both gateways serve the same sim engine; a project allows LIMIT requests a minute, and
a client sends to both at once, past the limit. Counted per process, the pair would
let 2 x LIMIT through. Together they let LIMIT through, give or take what the limiter
allows for (docs/auth.md): at most one over per exchange's first request, and the
previous minute's share when the run crosses a minute boundary (the window slides). The
key is made through the first server's admin API and found by the second in the store.
A key revoked through one server is then refused by the other too.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from llmgw.testing.server import GatewayProcess, running_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim

LIMIT = 40
RUN_S = 2.0
"""Long enough for several limit exchanges (every 250 ms) while both are refused."""
WAIT_S = 15.0
CHAT = {"model": "chat-a", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "chat-a")
    try:
        yield process
    finally:
        process.stop()


def admin_call(
    client: httpx.Client, gateway: GatewayProcess, method: str, path: str, body: object
) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {gateway.admin_token()}"}
    answer = client.request(method, gateway.admin_url + path, json=body, headers=headers)
    assert answer.status_code < 300, answer.text
    data: dict[str, Any] = answer.json()
    return data


def gateways_heard(client: httpx.Client, gateway: GatewayProcess) -> float:
    for line in client.get(gateway.admin_url + "/metrics").text.splitlines():
        if line.startswith("llmgw_auth_gateways "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def hammer(gateway: GatewayProcess, key: str, until: float, statuses: Counter[int]) -> None:
    """Sends one request after another to `gateway` until `until` (monotonic)."""
    headers = {"authorization": f"Bearer {key}"}
    with httpx.Client(timeout=10) as client:
        while time.monotonic() < until:
            answer = client.post(gateway.base_url + "/chat/completions", json=CHAT, headers=headers)
            statuses[answer.status_code] += 1


def test_two_servers_on_one_postgresql_hold_a_limit_and_see_a_revocation(
    engine: SimEngineProcess, postgres_location: str
) -> None:
    config = {
        "auth": {"enabled": True, "store": postgres_location, "cache_ttl": "1s"},
        "endpoints": [endpoint("sim-1", engine, "chat-a")],
    }
    with (
        httpx.Client(timeout=10) as client,
        running_gateway(config) as first,
        running_gateway(config) as second,
    ):
        admin_call(client, first, "POST", "/api/orgs", {"id": "o"})
        admin_call(client, first, "POST", "/api/teams", {"id": "t", "org": "o"})
        admin_call(client, first, "POST", "/api/projects", {"id": "p", "team": "t", "rpm": LIMIT})
        made = admin_call(client, first, "POST", "/api/keys", {"project": "p"})
        deadline = time.monotonic() + WAIT_S
        while gateways_heard(client, first) < 2 or gateways_heard(client, second) < 2:
            assert time.monotonic() < deadline, "the two gateways never heard of each other"
            time.sleep(0.05)

        started = time.time()
        until = time.monotonic() + RUN_S
        seen: list[Counter[int]] = [Counter(), Counter()]
        threads = [
            threading.Thread(target=hammer, args=(gateway, made["key"], until, statuses))
            for gateway, statuses in zip((first, second), seen, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(RUN_S + WAIT_S)
        finished = time.time()

        assert all(set(statuses) <= {200, 429} for statuses in seen), seen
        assert all(statuses[429] > 0 for statuses in seen), seen  # both pushed past the limit
        admitted = seen[0][200] + seen[1][200]
        crossed_minute = int(started // 60) != int(finished // 60)
        slack = LIMIT * (finished - started) / 60 if crossed_minute else 0
        assert LIMIT - 2 <= admitted <= LIMIT + 1 + slack, seen

        # Revoked through the first server, the key is refused by the second within
        # auth.cache_ttl (here 1 s), as it is at once by the first.
        admin_call(client, first, "DELETE", f"/api/keys/{made['id']}", None)
        headers = {"authorization": f"Bearer {made['key']}"}
        assert (
            client.post(first.base_url + "/chat/completions", json=CHAT, headers=headers).status_code == 401
        )
        deadline = time.monotonic() + WAIT_S
        while (
            client.post(second.base_url + "/chat/completions", json=CHAT, headers=headers).status_code != 401
        ):
            assert time.monotonic() < deadline, "the second server never refused the revoked key"
            time.sleep(0.1)

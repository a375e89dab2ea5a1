"""A real `llmgw server` does not grow with what callers make up: thousands of distinct
junk API keys (each in an 8 KB header) and thousands of distinct 8 KB session ids
leave its resident memory where it was, give or take a bound far below what keeping
that text would cost (5,000 x 8 KB = 40 MB per kind).

Each kind is sent once to warm up (the allocator's pools, the caches' first entries)
before the resident size is read from /proc/<pid>/status, then again with new values."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from llmgw.testing.server import GatewayProcess, running_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim

COUNT = 5_000
WARM_UP = 500
PAD_BYTES = 8 * 1024
GROWTH_BOUND_BYTES = 12 * 1024 * 1024
"""Well below the 40 MB the text of one kind's headers adds up to."""
# Over 10,000 requests through one process: minutes on a loaded machine.
pytestmark = pytest.mark.timeout(900)
CHAT = {"model": "chat-a", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc status")


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "chat-a")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def gateway(engine: SimEngineProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    store = tmp_path_factory.mktemp("hostile-memory") / "llmgw.db"
    config = {
        "auth": {"enabled": True, "store": str(store), "negative_ttl": "10m"},
        "endpoints": [endpoint("sim-1", engine, "chat-a")],
    }
    with running_gateway(config, timeout=60) as process:
        yield process


def _junk_key() -> str:
    """A made-up key of the right shape, padded to 8 KB the way a header may be."""
    return "Bearer" + " " * PAD_BYTES + f"llmgw-{secrets.token_hex(4)}-{secrets.token_urlsafe(32)}"


def _grows_by(gateway: GatewayProcess, send: object) -> int:
    assert callable(send)
    send(WARM_UP)
    before = rss_bytes(gateway.process.pid)
    send(COUNT)
    return rss_bytes(gateway.process.pid) - before


def test_distinct_junk_keys_do_not_grow_the_gateway(gateway: GatewayProcess) -> None:
    with httpx.Client(base_url=gateway.base_url, timeout=10) as client:

        def send(count: int) -> None:
            for _ in range(count):
                answer = client.post("/chat/completions", json=CHAT, headers={"authorization": _junk_key()})
                assert answer.status_code == 401

        growth = _grows_by(gateway, send)
    assert growth < GROWTH_BOUND_BYTES, f"{COUNT} junk keys grew the gateway by {growth / 2**20:.1f} MiB"


def test_distinct_session_ids_do_not_grow_the_gateway(gateway: GatewayProcess) -> None:
    with httpx.Client(timeout=10) as admin:
        token = {"authorization": f"Bearer {gateway.admin_token()}"}
        for path, body in (
            ("/api/orgs", {"id": "o"}),
            ("/api/teams", {"id": "t", "org": "o"}),
            ("/api/projects", {"id": "p", "team": "t"}),
        ):
            assert admin.post(gateway.admin_url + path, json=body, headers=token).status_code < 300
        key = admin.post(gateway.admin_url + "/api/keys", json={"project": "p"}, headers=token).json()["key"]
    with httpx.Client(base_url=gateway.base_url, timeout=10) as client:

        def send(count: int) -> None:
            for _ in range(count):
                session = secrets.token_hex(PAD_BYTES // 2)
                headers = {"authorization": f"Bearer {key}", "x-session-id": session}
                assert client.post("/chat/completions", json=CHAT, headers=headers).status_code == 200

        growth = _grows_by(gateway, send)
    assert growth < GROWTH_BOUND_BYTES, f"{COUNT} session ids grew the gateway by {growth / 2**20:.1f} MiB"

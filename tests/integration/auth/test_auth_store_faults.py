"""A SQLite store that fails under traffic, in a real `llmgw server`: its directory
taken away while requests flow (every write then fails: the journal cannot be made and
SQLite sees its file moved), given back, taken away again across a stop and a start.

The gateway keeps answering, logs the outage once when it begins and once when it
ends, and every usage record reaches the store: after the store is back, or, for a
stop during the outage, from the spill file the next start replays. (With WAL the
store's `-shm` file was mapped into memory, and a fault on it was a SIGBUS: the
gateway died with no log line and lost every buffered record.)
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import SimEngineProcess
from support.sims import endpoint, sim

WAIT_S = 60.0
CHAT = {"model": "chat-a", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}


@pytest.fixture(scope="module")
def engine() -> Iterator[SimEngineProcess]:
    process = sim("--model", "chat-a")
    try:
        yield process
    finally:
        process.stop()


class Deployment:
    def __init__(self, root: Path, engine: SimEngineProcess) -> None:
        self.store_dir = root / "store"
        self.away = root / "store-away"
        self.state = root / "state"
        self.token_file = root / "admin-token"
        self.config: dict[str, Any] = {
            "admin_token_file": str(self.token_file),
            "auth": {"enabled": True, "store": str(self.store_dir / "llmgw.db"), "flush_interval": "100ms"},
            "endpoints": [endpoint("sim-1", engine, "chat-a")],
        }
        self.client = httpx.Client(timeout=10)

    def start(self) -> GatewayProcess:
        env = {**os.environ, "STATE_DIRECTORY": str(self.state)}
        return start_gateway(self.config, env=env, timeout=60)

    def admin(self, gateway: GatewayProcess, method: str, path: str, body: Any = None) -> Any:
        token = self.token_file.read_text().strip()
        answer = self.client.request(
            method, gateway.admin_url + path, json=body, headers={"authorization": f"Bearer {token}"}
        )
        assert answer.status_code < 300, answer.text
        return answer.json()

    def chat(self, gateway: GatewayProcess, key: str, count: int) -> None:
        for _ in range(count):
            answer = self.client.post(
                gateway.base_url + "/chat/completions", json=CHAT, headers={"authorization": f"Bearer {key}"}
            )
            assert answer.status_code == 200, answer.text

    def records(self, gateway: GatewayProcess, count: int) -> None:
        """Waits until the store holds `count` records of the project."""
        deadline = time.monotonic() + WAIT_S
        while True:
            totals = self.admin(gateway, "GET", "/api/usage?by=project&since=1h")["data"]
            found = sum(t["requests"] for t in totals if t["project"] == "p")
            if found >= count:
                assert found == count
                return
            assert time.monotonic() < deadline, f"{found} of {count} records in the store"
            time.sleep(0.2)


def wait_for_log(gateway: GatewayProcess, text: str, times: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while gateway.log().count(text) < times:
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{gateway.log()}"
        time.sleep(0.1)


def test_a_store_taken_away_under_traffic_costs_no_request_and_no_record(
    engine: SimEngineProcess, tmp_path: Path
) -> None:
    deployment = Deployment(tmp_path, engine)
    gateway = deployment.start()
    try:
        deployment.admin(gateway, "POST", "/api/orgs", {"id": "o"})
        deployment.admin(gateway, "POST", "/api/teams", {"id": "t", "org": "o"})
        deployment.admin(gateway, "POST", "/api/projects", {"id": "p", "team": "t"})
        key = deployment.admin(gateway, "POST", "/api/keys", {"project": "p"})["key"]
        deployment.chat(gateway, key, 10)
        deployment.records(gateway, 10)

        # Taken away and given back: the gateway answers throughout, logs the outage once
        # each way, and the records of the outage reach the store once it is back.
        deployment.store_dir.rename(deployment.away)
        deployment.chat(gateway, key, 20)
        wait_for_log(gateway, "usage store refuses writes", 1)
        deployment.chat(gateway, key, 20)
        deployment.away.rename(deployment.store_dir)
        wait_for_log(gateway, "usage store writes again", 1)
        deployment.records(gateway, 50)
        log = gateway.log()
        assert log.count("usage store refuses writes") == 1
        assert "Traceback" not in log

        # Taken away again, and the gateway stopped meanwhile: its records go to the
        # spill file, which the next start replays.
        deployment.store_dir.rename(deployment.away)
        deployment.chat(gateway, key, 15)
        wait_for_log(gateway, "usage store refuses writes", 2)
    finally:
        assert gateway.stop() == 0
    assert "usage records the store did not take are kept in" in gateway.log()
    spilled = deployment.state / "usage-spill.jsonl"
    assert stat.S_IMODE(spilled.stat().st_mode) == 0o600
    assert stat.S_IMODE(deployment.state.stat().st_mode) == 0o700
    deployment.away.rename(deployment.store_dir)
    gateway = deployment.start()
    try:
        deployment.records(gateway, 65)
        assert not spilled.exists()
        assert "replaying 15 usage records" in gateway.log()
    finally:
        gateway.stop()
        deployment.client.close()


def test_a_store_file_cut_short_under_traffic_is_logged_not_a_crash(
    engine: SimEngineProcess, tmp_path: Path
) -> None:
    """What killed the gateway with a SIGBUS in WAL mode, where the cut file was the
    mapped `-shm`: now no file is mapped, and a cut one is an error SQLite returns."""
    deployment = Deployment(tmp_path, engine)
    gateway = deployment.start()
    try:
        deployment.admin(gateway, "POST", "/api/orgs", {"id": "o"})
        deployment.admin(gateway, "POST", "/api/teams", {"id": "t", "org": "o"})
        deployment.admin(gateway, "POST", "/api/projects", {"id": "p", "team": "t"})
        key = deployment.admin(gateway, "POST", "/api/keys", {"project": "p"})["key"]
        deployment.chat(gateway, key, 10)
        deployment.records(gateway, 10)
        assert not list(deployment.store_dir.glob("*-shm"))
        for store_file in deployment.store_dir.iterdir():
            os.truncate(store_file, 0)
        deployment.chat(gateway, key, 20)
        wait_for_log(gateway, "usage store refuses writes", 1)
        deployment.chat(gateway, key, 20)
        assert gateway.process.poll() is None
    finally:
        deployment.client.close()
        assert gateway.stop() == 0
    assert "usage records the store did not take are kept in" in gateway.log()

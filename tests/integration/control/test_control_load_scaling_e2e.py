"""Scaling on load through real processes: a server with its control plane, one agent
and sim engines. A model at min 1, max 3 kept saturated gets a second replica (and `ctl
explain` gives the figures); once the load ends it returns to one."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from control_helpers import cluster, sim_model, wait_for

pytestmark = pytest.mark.slow

SLOW_SIM = ["--decode-ms", "150", "--prefill-ms-per-token", "0.01", "--default-max-tokens", "4"]
"""About 0.6 s a request: a few clients in a loop keep a replica above target."""


def test_sustained_load_adds_a_replica_and_its_end_returns_to_min(tmp_path: Path) -> None:
    model = sim_model("chat", min=1, max=3)
    model["profiles"][0]["args"] = SLOW_SIM
    with cluster(tmp_path) as c:
        server = c.start_server(
            model,
            top={"router": {"activation_wait": "60s", "scoring": {"target_inflight": 1}}},
            scale_up_after="1s",
            scale_down_after="3s",
        )
        c.start_agent("n1")
        token = (tmp_path / "secrets" / "admin-token").read_text().strip()

        def replicas() -> int:
            return sum(len(r) for r in c.engines("chat").values())

        def explain() -> str:
            answer = httpx.get(
                server.admin_url + "/api/control/models/chat/explain",
                headers={"authorization": f"Bearer {token}"},
                timeout=10,
            )
            assert answer.status_code == 200, answer.text
            return " ".join(answer.json()["lines"])

        serving = "one replica serving\n"
        wait_for(lambda: replicas() == 1 and c.chat("chat").status_code == 200, 90, serving + c.logs())

        stop = threading.Event()
        answers: list[int] = []

        def client() -> None:
            deadline = time.monotonic() + 120  # bounded even if the test never stops it
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    answers.append(c.chat("chat", timeout=30).status_code)
                except httpx.HTTPError:
                    answers.append(0)

        clients = [threading.Thread(target=client, daemon=True) for _ in range(3)]
        for t in clients:
            t.start()
        try:
            wait_for(lambda: replicas() >= 2, 90, "a second replica under load\n" + c.logs(), pause=0.5)
            said = wait_for(lambda: (text := explain()) and "load scaling" in text and text, 30, "explained")
            assert "level " in said
            assert "up at 1.00 for 1s" in said
        finally:
            stop.set()
            for t in clients:
                t.join(40)
        assert answers
        assert all(code == 200 for code in answers), answers
        wait_for(lambda: replicas() == 1, 90, "back to one replica after the load\n" + c.logs(), pause=0.5)
        assert "load scaling" in explain()

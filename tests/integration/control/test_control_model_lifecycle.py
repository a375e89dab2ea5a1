"""A weights update through real processes: a server with the control plane and an agent
running sims. `llmgw ctl model update` starts the candidate as the model's canary, which
survives a server restart; `promote` is refused until the candidate passed the model's
eval gate, then moves the model to the new source keeping the old in origin.previous;
`rollback` goes back to it. Each step is refused with one sentence when it cannot apply
(no candidate, no eval result, nothing to roll back to), and a client sending
throughout promote and rollback sees no error.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from control_helpers import Cluster, cluster, sim_model, wait_for

pytestmark = pytest.mark.slow

MAX_CLIENT_REQUESTS = 5000


def _ctl(c: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    token = (c.tmp / "secrets" / "admin-token").read_text().strip()
    return subprocess.run(
        [sys.executable, "-m", "llmgw", "ctl", "--admin", c.server.admin_url, "--token", token, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _models(c: Cluster) -> dict[str, dict[str, Any]]:
    listed = _ctl(c, "models", "--json")
    assert listed.returncode == 0, listed.stderr
    return {row["name"]: row for row in json.loads(listed.stdout)}


def _refused(c: Cluster, words: str, *args: str) -> None:
    answer = _ctl(c, *args)
    assert answer.returncode == 2, answer.stdout + answer.stderr
    assert words in answer.stderr
    assert "Traceback" not in answer.stderr


def _answers(c: Cluster) -> bool:
    return bool(c.chat("chat").status_code == 200)


class Client:
    """Sends chat requests one after another until stopped; keeps every failure."""

    def __init__(self, c: Cluster) -> None:
        self._c = c
        self._stop = threading.Event()
        self.sent = 0
        self.failures: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.sent < MAX_CLIENT_REQUESTS:
            self.sent += 1
            try:
                response = self._c.chat("chat", timeout=30)
            except httpx.HTTPError as exc:
                self.failures.append(repr(exc))
                continue
            if response.status_code != 200:
                self.failures.append(f"{response.status_code}: {response.text[:200]}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def test_update_promote_rollback_round_trip(tmp_path: Path) -> None:
    model = sim_model("chat", min=1, eval={"suite": "arithmetic"})
    with cluster(tmp_path) as c:
        c.start_server(model)
        c.start_agent("node-a")
        wait_for(lambda: _answers(c), 90, "chat never answered:\n" + c.logs(), pause=0.5)

        _refused(c, "no candidate to promote", "model", "promote", "chat")
        _refused(c, "no previous source", "model", "rollback", "chat")
        updated = _ctl(c, "model", "update", "chat", "--source", "sim/chat-v2", "--revision", "r2")
        assert updated.returncode == 0, updated.stderr + c.logs()
        _refused(c, "serves sim/chat already", "model", "update", "chat", "--source", "sim/chat")

        # The candidate is kept in the store: a restarted server still has it.
        c.server.stop()
        c.start_server(model)
        models = _models(c)
        assert (models["chat"]["source"], models["chat"]["canary"]) == ("sim/chat", "chat@candidate")
        assert models["chat@candidate"]["source"] == "sim/chat-v2"

        # The eval gate holds the promotion until the candidate passed (results are the
        # gateway's, in memory: the restart forgot any).
        _refused(c, "has no eval result", "model", "promote", "chat")
        wait_for(lambda: c.engines("chat@candidate"), 90, "the candidate never started:\n" + c.logs())
        evaluated = _ctl(c, "eval", "chat@candidate")
        assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr + c.logs()

        client = Client(c)
        try:
            promoted = _ctl(c, "model", "promote", "chat")
            assert promoted.returncode == 0, promoted.stderr + c.logs()
            assert "serves sim/chat-v2" in promoted.stdout
            _refused(c, "already promoted", "model", "promote", "chat")
            models = _models(c)
            assert "chat@candidate" not in models
            chat = models["chat"]
            assert (chat["source"], chat["canary"], chat["previous"]) == ("sim/chat-v2", None, "sim/chat")
            wait_for(lambda: not c.engines("chat@candidate"), 60, "the candidate was never stopped")

            rolled = _ctl(c, "model", "rollback", "chat")
            assert rolled.returncode == 0, rolled.stderr + c.logs()
            assert "serves sim/chat" in rolled.stdout
            _refused(c, "no previous source", "model", "rollback", "chat")
            chat = _models(c)["chat"]
            assert (chat["source"], chat["previous"]) == ("sim/chat", None)
            wait_for(lambda: client.sent > 20, 60, "the client sent too few requests")
        finally:
            client.stop()
        assert client.failures == [], client.failures[:5]

"""The sweep of expired responses and conversations: it asks the store with the clock's
time, and a store that does not answer is retried next time rather than ending it."""

from __future__ import annotations

import asyncio

import pytest

from llmgw.batch.responses_runtime import retention_s, sweep
from llmgw.config import settings_from_mapping
from llmgw.errors import StoreUnavailable


class _Repo:
    def __init__(self) -> None:
        self.asked: list[float] = []
        self.enough = asyncio.Event()

    async def sweep(self, now: float) -> int:
        self.asked.append(now)
        if len(self.asked) == 3:
            self.enough.set()
        if len(self.asked) == 1:
            raise StoreUnavailable("the store did not answer")
        return 1


def test_the_sweep_survives_a_store_outage(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> list[float]:
        repo = _Repo()
        task = asyncio.create_task(sweep(repo, clock=lambda: 42.0, interval_s=0.0))  # type: ignore[arg-type]
        await asyncio.wait_for(repo.enough.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return repo.asked

    asked = asyncio.run(scenario())
    assert asked[:3] == [42.0, 42.0, 42.0]
    assert "the sweep of expired responses failed" in caplog.text


def test_retention_is_threads_retain_hours_else_thirty_days() -> None:
    endpoints = [{"id": "r1", "url": "http://127.0.0.1:9", "models": ["m"]}]
    plain = settings_from_mapping({"endpoints": endpoints}, source="test", environ={})
    assert retention_s(plain) == 30 * 24 * 3600.0
    kept = settings_from_mapping(
        {"endpoints": endpoints, "threads": {"store": "t.db", "retain_hours": 2}}, source="test", environ={}
    )
    assert retention_s(kept) == 7200.0

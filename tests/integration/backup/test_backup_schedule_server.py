"""A server with `backup_schedule` runs the backup itself at that time of day, and one that
fails reaches the webhooks as `backup.failed`. Here `backup_dir` lies under a plain file,
so it cannot be made; the schedule is the next whole minute (UTC) at least LEAD_S away
(time for the server to start on a loaded machine), so the test waits at most
LEAD_S + 60 s for it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from llmgw.testing.server import running_gateway
from llmgw.testing.webhook import WebhookReceiver, receiver

LEAD_S = 45
# The server must be up before the scheduled minute; a start slower than this fails.
START_TIMEOUT_S = 40


@pytest.fixture
def rx() -> Iterator[WebhookReceiver]:
    yield from receiver()


@pytest.mark.slow
@pytest.mark.timeout(LEAD_S + 60 + 90)
def test_a_failed_scheduled_backup_reaches_the_webhook_as_backup_failed(
    tmp_path: Path, rx: WebhookReceiver
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where backup_dir's parent should be\n")
    due = (datetime.now(UTC) + timedelta(seconds=LEAD_S + 60)).replace(second=0, microsecond=0)
    config = {
        "auth": {"enabled": True, "store": str(tmp_path / "llmgw.db")},
        "endpoints": [{"id": "e", "url": "http://127.0.0.1:9", "models": ["chat"]}],
        "backup_dir": str(blocker / "backups"),
        "backup_schedule": due.strftime("%H:%M"),
        "notify": {"webhooks": [{"name": "ops", "url": rx.url, "events": ["backup.failed"]}]},
    }
    with running_gateway(config, timeout=START_TIMEOUT_S) as server:
        rx.wait_for(lambda: rx.events("backup.failed"), LEAD_S + 60 + 30, "no backup.failed event")
        event = rx.events("backup.failed")[0].event
        assert event["data"]["started"] >= due.timestamp()
        assert f"backup_dir {blocker / 'backups'}: cannot be made" in event["data"]["error"]
        assert "the scheduled backup failed" in server.log()

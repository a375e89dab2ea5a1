"""A webhook receiver down for 5 minutes loses no event (the issue's figure), measured in
real time: the outbox of `llmgw.notify.outbox` over a SQLite store in a temporary folder,
with its own background loop (`Outbox.run`), the default `RetrySchedule` and a real
aiohttp receiver on loopback (`llmgw.testing.webhook`).

The receiver stops listening; for `--down` seconds events are emitted, each twice (as a
control plane that restarted would); the receiver comes back, and the run waits until
every event is delivered or `--wait` seconds pass. Reported: events emitted, received,
distinct ids received, duplicates, how long after the receiver came back the last one
arrived, and the most attempts a delivery took. As the baseline in the same run, the
first `--before` events are emitted while the receiver is up (delivered on the first
attempt).

    .venv/bin/python bench/notify/receiver_down.py [--down 300] [--events 100] [--before 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from llmgw.notify.hooks import Hook
from llmgw.notify.outbox import Outbox
from llmgw.notify.signing import SIGNATURE_HEADER, verify
from llmgw.store import Store
from llmgw.testing.webhook import WebhookReceiver

SECRET = b"bench-secret"


async def run(down_s: float, events: int, before: int, wait_s: float) -> dict[str, object]:
    rx = WebhookReceiver().start()
    with tempfile.TemporaryDirectory() as folder:
        store = await Store.open(str(Path(folder) / "store.db"))
        outbox = Outbox((Hook("rx", rx.url, SECRET, (), 10.0),), store.notify)
        loop = asyncio.create_task(outbox.run())
        try:
            for i in range(before):
                outbox.emit("node.lost", f"before-{i}", {"i": i})
            deadline = time.monotonic() + 30
            while len(rx.received) < before and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            baseline = len(rx.received)
            rx.stop()
            went_down = time.monotonic()
            for i in range(events):
                outbox.emit("node.lost", f"down-{i}", {"i": i})
                outbox.emit("node.lost", f"down-{i}", {"i": i})  # the same occurrence again
                await asyncio.sleep(down_s / max(events, 1))
            await asyncio.sleep(max(0.0, down_s - (time.monotonic() - went_down)))
            rx.start()
            back = time.monotonic()
            outage_s = back - went_down
            deadline = back + wait_s
            while len(rx.received) < before + events and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            last_after_s = time.monotonic() - back
            await asyncio.sleep(2)  # anything sent twice would arrive now
            log = await store.notify.log("rx", before + events + 10)
        finally:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)
            await store.close()
            rx.close()
    ids = [r.event["id"] for r in rx.received]
    # The HMAC of each, checked after the run (hence the wide tolerance).
    signed = sum(
        verify(SECRET, r.body, r.headers[SIGNATURE_HEADER.lower()], time.time(), tolerance_s=7200)
        for r in rx.received
    )
    return {
        "receiver_down_s": round(outage_s, 1),
        "emitted_before": before,
        "received_before_outage": baseline,
        "emitted_during_outage": events,
        "emitted_calls_during_outage": 2 * events,
        "received": len(ids),
        "distinct_received": len(set(ids)),
        "duplicates": len(ids) - len(set(ids)),
        "last_arrival_after_back_s": round(last_after_s, 1),
        "max_attempts": max(d.attempts for d in log),
        "delivered_rows": sum(d.state == "delivered" for d in log),
        "signature_verified": signed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--down", type=float, default=300.0)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--before", type=int, default=10)
    parser.add_argument("--wait", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args()
    result = asyncio.run(run(args.down, args.events, args.before, args.wait))
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    command = " ".join([".venv/bin/python", "bench/notify/receiver_down.py", *sys.argv[1:]])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"notify-receiver-down-{day}.json").write_text(json.dumps(result, indent=2) + "\n")
    rows = "\n".join(f"| {k} | {v} |" for k, v in result.items())
    (args.out / f"notify-receiver-down-{day}.md").write_text(
        f"# A webhook receiver down, then back\n\n```sh\n{command}\n```\n\n"
        f"| figure | value |\n|---|---|\n{rows}\n"
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

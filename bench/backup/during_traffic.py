"""`llmgw server backup` of a store with a million usage records while the gateway serves.

A SQLite store is filled with `--records` usage records through the store's own batch
write (`store.usage.write_batch`, the gateway's path: a few thousand rows of batches),
then `llmgw server` runs on it with auth on, in front of a sim engine. `--clients`
threads send chat requests one after another, each timed, for `--before` seconds, then
`llmgw server backup` runs (encrypted to an age recipient made here), then traffic goes
on for `--after` seconds. The figure: the backup's wall time, and the request latency
(median, 99th percentile, max) of requests begun before the backup against those begun
while it ran.

    .venv/bin/python bench/backup/during_traffic.py [--records 1000000] [--clients 4]
        [--before 10] [--after 5] [--out bench/results]

Writes `backup-during-traffic-<date>.md` and `.json` into --out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pyrage

from llmgw.store import Store, UsageRow
from llmgw.store.usage import five_minute_sums, group_rows
from llmgw.testing.server import start_gateway
from llmgw.testing.sim import start_sim_engine

FAST = ("--decode-ms", "1", "--prefill-ms-per-token", "0.01", "--default-max-tokens", "12")
CHUNK = 20_000
CHAT = {"model": "chat-a", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}


def _row(i: int, now: float) -> UsageRow:
    return UsageRow(
        ts=now - (i % 86_400),
        request_id=f"bench-{i}",
        key_id=f"key{i % 50:05d}",
        user_id=None,
        project_id=f"project-{i % 10}",
        team_id=f"team-{i % 3}",
        org_id="org",
        model=f"model-{i % 4}",
        replica=f"replica-{i % 8}",
        status=200,
        stream=True,
        prompt_tokens=512,
        completion_tokens=128,
        cost_micros=640,
        queue_s=0.002,
        ttft_s=0.05,
        duration_s=0.8,
        tags={"run": "bench"},
    )


async def fill(path: Path, records: int) -> float:
    store = await Store.open(str(path))
    started = time.perf_counter()
    now = time.time()
    try:
        for first in range(0, records, CHUNK):
            rows = [_row(i, now) for i in range(first, min(first + CHUNK, records))]
            await store.usage.write_batch(group_rows(rows), five_minute_sums(rows), {})
    finally:
        await store.close()
    return time.perf_counter() - started


def _admin(client: httpx.Client, url: str, token: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = client.post(url + path, json=body, headers={"authorization": f"Bearer {token}"})
    answer.raise_for_status()
    data: dict[str, Any] = answer.json()
    return data


def load(base_url: str, key: str, until: list[float], samples: list[tuple[float, float, int]]) -> None:
    """Requests one after another until `until[0]` (monotonic): (start, latency, status)."""
    with httpx.Client(timeout=30) as client:
        while time.monotonic() < until[0]:
            begun = time.monotonic()
            answer = client.post(
                base_url + "/chat/completions", json=CHAT, headers={"authorization": f"Bearer {key}"}
            )
            samples.append((begun, time.monotonic() - begun, answer.status_code))


def summary(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {"count": 0}
    ordered = sorted(latencies)
    return {
        "count": len(ordered),
        "median_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "max_ms": ordered[-1] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--before", type=float, default=10.0)
    parser.add_argument("--after", type=float, default=5.0)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "results")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="llmgw-bench-backup-"))
    store_path = work / "state" / "llmgw.db"
    store_path.parent.mkdir()
    fill_s = asyncio.run(fill(store_path, args.records))
    store_bytes = store_path.stat().st_size
    print(f"filled {args.records} records in {fill_s:.1f} s ({store_bytes / 1e6:.0f} MB)", flush=True)
    identity = pyrage.x25519.Identity.generate()
    engine = start_sim_engine(*FAST, "--model", "chat-a")
    config = {
        "auth": {"enabled": True, "store": str(store_path)},
        "endpoints": [{"id": "sim-1", "url": engine.url, "models": ["chat-a"], "engine": "sim"}],
        "backup_dir": str(work / "backups"),
        "backup_recipients": [str(identity.to_public())],
    }
    gateway = start_gateway(config, timeout=120)
    try:
        with httpx.Client(timeout=30) as client:
            token = gateway.admin_token()
            _admin(client, gateway.admin_url, token, "/api/orgs", {"id": "o"})
            _admin(client, gateway.admin_url, token, "/api/teams", {"id": "t", "org": "o"})
            _admin(client, gateway.admin_url, token, "/api/projects", {"id": "p", "team": "t"})
            key = _admin(client, gateway.admin_url, token, "/api/keys", {"project": "p"})["key"]
        samples: list[tuple[float, float, int]] = []
        until = [float("inf")]
        threads = [
            threading.Thread(target=load, args=(gateway.base_url, key, until, samples))
            for _ in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        time.sleep(args.before)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLMGW_")}
        backup_start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "llmgw", "server", "backup", "--config", str(gateway.config_path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
        backup_end = time.monotonic()
        archive_bytes = Path(done.stdout.splitlines()[0]).stat().st_size if done.returncode == 0 else 0
        until[0] = backup_end + args.after
        for thread in threads:
            thread.join(args.after + 60)
    finally:
        gateway.stop()
        engine.stop()
        shutil.rmtree(work, ignore_errors=True)
    if done.returncode != 0:
        raise SystemExit(f"the backup failed: {done.stderr}")
    before = [lat for begun, lat, _ in samples if begun < backup_start]
    during = [lat for begun, lat, _ in samples if backup_start <= begun < backup_end]
    statuses = sorted({status for _, _, status in samples})
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "records": args.records,
        "store_mb": round(store_bytes / 1e6, 1),
        "archive_mb": round(archive_bytes / 1e6, 1),
        "backup_s": round(backup_end - backup_start, 2),
        "clients": args.clients,
        "statuses": statuses,
        "before": summary(before),
        "during": summary(during),
        "cpus": os.cpu_count(),
    }
    base_median = result["before"].get("median_ms", 0.0)
    result["max_during_over_median_before"] = (
        round(result["during"]["max_ms"] / base_median, 2) if during and base_median else None
    )
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"backup-during-traffic-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / f"backup-during-traffic-{stamp}.md").write_text(_report(result))
    print(json.dumps(result, indent=2))


def _report(r: dict[str, Any]) -> str:
    def row(name: str, s: dict[str, float]) -> str:
        if not s.get("count"):
            return f"| {name} | 0 | | | |"
        return f"| {name} | {s['count']} | {s['median_ms']:.1f} | {s['p99_ms']:.1f} | {s['max_ms']:.1f} |"

    return "\n".join(
        [
            f"# Backup during traffic ({r['date']})",
            "",
            "`bench/backup/during_traffic.py`: `llmgw server backup` (SQLite store, age-encrypted) while",
            f"{r['clients']} clients send chat requests one after another through `llmgw server` (auth on)",
            f"to a sim engine, on a machine with {r['cpus']} CPUs shared with other work.",
            "",
            f"- usage records in the store: {r['records']:,} ({r['store_mb']} MB file)",
            f"- archive: {r['archive_mb']} MB",
            f"- backup wall time: **{r['backup_s']} s** (target: under 60 s)",
            f"- statuses seen: {r['statuses']}",
            f"- slowest request begun during the backup / median before it: "
            f"**{r['max_during_over_median_before']}x** (target: at most 2x)",
            "",
            "| requests begun | count | median ms | p99 ms | max ms |",
            "|---|---|---|---|---|",
            row("before the backup", r["before"]),
            row("during the backup", r["during"]),
            "",
        ]
    )


if __name__ == "__main__":
    main()

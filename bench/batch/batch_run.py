"""A batch of `--lines` requests (the issue's figure: 50,000) through a real `llmgw
server` with auth on in front of a fast sim engine, with the `openai` SDK: the input
file padded to `--mib` MiB is uploaded, the batch created and polled to its end, the
gateway optionally SIGKILLed once `--kill-at` of the lines are done and started again
on the same store and state directory. Sampled all along: the gateway's resident
memory (VmRSS, every 0.2 s). Reported: lines lost (custom ids missing from the output),
lines duplicated (custom ids in it twice), requests the sim saw, wall time, and memory
before the upload, its peak during the upload and during the batch.

    .venv/bin/python bench/batch/batch_run.py [--lines 50000] [--mib 100] [--kill-at 0.5]
        [--concurrency 16]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import start_sim_engine

SIM_ARGS = (
    "--decode-ms",
    "1",
    "--prefill-ms-per-token",
    "0.001",
    "--default-max-tokens",
    "4",
    "--model",
    "m",
)


class Rss:
    """The peak resident memory of one process between `mark`s, sampled in a thread."""

    def __init__(self) -> None:
        self.pid = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, self.now())

    def now(self) -> int:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except (FileNotFoundError, ProcessLookupError):
            pass
        return 0

    def mark(self) -> int:
        peak, self.peak = self.peak, self.now()
        return max(peak, self.peak)

    def close(self) -> None:
        self._stop.set()


def _gateway(root: Path, sim_url: str, concurrency: int, lines: int) -> GatewayProcess:
    config = {
        "auth": {"enabled": True, "store": str(root / "llmgw.db"), "flush_interval": "1s"},
        "admin_token_file": str(root / "admin-token"),
        "router": {
            "batch": {"max_file_bytes": 1 << 30, "max_lines": lines, "concurrency": concurrency},
        },
        "endpoints": [{"id": "sim", "url": sim_url, "models": ["m"], "engine": "sim"}],
    }
    return start_gateway(config, timeout=120, env={**os.environ, "STATE_DIRECTORY": str(root / "state")})


def _key(gateway: GatewayProcess, root: Path) -> str:
    token = (root / "admin-token").read_text().strip()
    with httpx.Client(base_url=gateway.admin_url, headers={"authorization": f"Bearer {token}"}) as admin:
        admin.post("/api/orgs", json={"id": "o"}).raise_for_status()
        admin.post("/api/teams", json={"id": "t", "org": "o"}).raise_for_status()
        admin.post("/api/projects", json={"id": "p", "team": "t"}).raise_for_status()
        made = admin.post("/api/keys", json={"project": "p"})
        made.raise_for_status()
        key: str = made.json()["key"]
        return key


def _input(path: Path, lines: int, mib: float) -> None:
    pad = "x" * max(0, int(mib * (1 << 20) / lines) - 160)
    with path.open("wb") as out:
        for i in range(lines):
            body = {"model": "m", "messages": [{"role": "user", "content": f"{i} {pad}"}], "max_tokens": 4}
            line = {"custom_id": f"r-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}
            out.write(orjson.dumps(line) + b"\n")


def run(lines: int, mib: float, kill_at: float, concurrency: int) -> dict[str, Any]:
    sim = start_sim_engine(*SIM_ARGS)
    rss = Rss()
    gateway: GatewayProcess | None = None
    try:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            source = root / "input.jsonl"
            _input(source, lines, mib)
            gateway = _gateway(root, sim.url, concurrency, lines)
            rss.pid = gateway.process.pid
            key = _key(gateway, root)
            client = openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0, timeout=600)
            time.sleep(1.0)
            idle = rss.mark()
            started = time.monotonic()
            with source.open("rb") as handle:
                uploaded = client.files.create(file=("input.jsonl", handle), purpose="batch")
            upload_s = time.monotonic() - started
            upload_peak = rss.mark()
            batch = client.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            killed_at = None
            batch_peaks = []
            started = time.monotonic()
            while True:
                batch = client.batches.retrieve(batch.id)
                if batch.status in ("completed", "failed", "cancelled", "expired"):
                    break
                done = batch.request_counts.completed if batch.request_counts else 0
                if killed_at is None and kill_at and done >= kill_at * lines:
                    batch_peaks.append(rss.mark())
                    os.kill(gateway.process.pid, signal.SIGKILL)
                    gateway.process.wait(30)
                    killed_at = done
                    gateway = _gateway(root, sim.url, concurrency, lines)
                    rss.pid = gateway.process.pid
                    client = openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0, timeout=600)
                if time.monotonic() - started > 3 * 3600:
                    break
                time.sleep(1.0)
            run_s = time.monotonic() - started
            batch_peaks.append(rss.mark())
            counts: Counter[str] = Counter()
            if batch.output_file_id:
                with client.files.with_streaming_response.content(batch.output_file_id) as answer:
                    for raw in answer.iter_lines():
                        if raw.strip():
                            counts[orjson.loads(raw)["custom_id"]] += 1
            seen = httpx.get(sim.admin_url + "/sim/state").json()["requests_seen"]
            return {
                "lines": lines,
                "input_mib": round(source.stat().st_size / (1 << 20), 1),
                "concurrency": concurrency,
                "status": batch.status,
                "request_counts": batch.request_counts.model_dump() if batch.request_counts else None,
                "killed_after_lines": killed_at,
                "lost": lines - len(counts),
                "duplicated": sum(n - 1 for n in counts.values()),
                "sim_requests_seen": seen,
                "upload_s": round(upload_s, 1),
                "batch_s": round(run_s, 1),
                "rss_idle_mib": round(idle / (1 << 20), 1),
                "rss_upload_peak_mib": round(upload_peak / (1 << 20), 1),
                "rss_batch_peaks_mib": [round(p / (1 << 20), 1) for p in batch_peaks],
            }
    finally:
        rss.close()
        if gateway is not None:
            gateway.stop()
        sim.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--mib", type=float, default=100.0)
    parser.add_argument("--kill-at", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()
    result = run(args.lines, args.mib, args.kill_at, args.concurrency)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    name = f"batch-run-{args.lines}-{stamp}"
    out = Path(args.out)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    command = "python bench/batch/batch_run.py " + " ".join(sys.argv[1:])
    rows = "\n".join(f"| {k} | {v} |" for k, v in result.items())
    (out / f"{name}.md").write_text(
        f"# Batch run\n\n```sh\n{command}\n```\n\n| figure | value |\n|---|---|\n{rows}\n"
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

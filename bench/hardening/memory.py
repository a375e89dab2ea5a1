"""What hostile input costs a running gateway: its resident memory and a legitimate
client's latency while thousands of requests carry made-up values.

Starts a sim engine and `llmgw server` with auth on (SQLite store, one project key),
measures a legitimate client's latency alone, then runs three attacks in turn, each
`--count` requests (or connections) with the legitimate client running beside it:

  junk-keys     distinct made-up API keys of the right shape, each header padded to
                8 KB (what the old gate kept, text and all, before knowing the key)
  session-ids   distinct 8 KB `x-session-id` values on valid requests (the session
                table kept each id's text)
  slow-bodies   connections that send a head declaring a 1 MiB body, 64 KB of it, and
                then nothing (the old server held them, and their bytes, forever)

The gateway's RSS (/proc/<pid>/status) is read idle and after each attack. The issue's
goal: within +50 MB of idle after 100,000 of each, and the legitimate client's p99
within 2x its unloaded figure.

    .venv/bin/python bench/hardening/memory.py --count 100000 --out bench/results/hardening-memory-DATE.md

The slow-body attack runs with `router.timeouts.body` at `--body-timeout` (2 s) so that
100,000 stalled bodies take minutes, not the default's 30 s each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Protocol

import httpx

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import start_sim_engine

PAD_BYTES = 8 * 1024
SLOW_DECLARED = 1024 * 1024
SLOW_SENT = 64 * 1024
CHAT = b'{"model":"chat-a","messages":[{"role":"user","content":"hi"}],"max_tokens":1}'


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def request(headers: dict[str, str], body: bytes = CHAT) -> bytes:
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n{lines}\r\n"
    ).encode() + body


async def read_status(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    await reader.readexactly(length)
    return status


async def keepalive_worker(port: int, make: Callable[[], bytes], count: int, expect: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for _ in range(count):
            writer.write(make())
            status = await read_status(reader)
            if status != expect:
                raise RuntimeError(f"expected {expect}, got {status}")
    finally:
        writer.close()


async def slow_body(port: int, key: str) -> str:
    """One stalled body, with a valid key (so the gateway reads it): what the gateway
    answers it with (or 'closed')."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        head = request({"authorization": f"Bearer {key}"}, b"")
        writer.write(head.replace(b"content-length: 0", b"content-length: %d" % SLOW_DECLARED))
        writer.write(b"x" * SLOW_SENT)
        head = await asyncio.wait_for(reader.read(1024), 120)
        return head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/1.1") else "closed"
    except (ConnectionError, TimeoutError):
        return "closed"
    finally:
        writer.close()


class Flag(Protocol):
    def is_set(self) -> bool: ...


async def legit_latencies(port: int, key: str, stop: Flag, floor: int) -> list[float]:
    """A legitimate client's request latencies (ms), one at a time until `stop` (and at
    least `floor` requests)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    make = request({"authorization": f"Bearer {key}", "x-session-id": "legit"})
    out: list[float] = []
    try:
        while not stop.is_set() or len(out) < floor:
            started = time.perf_counter()
            writer.write(make)
            if await read_status(reader) != 200:
                raise RuntimeError("the legitimate client was refused")
            out.append((time.perf_counter() - started) * 1000)
    finally:
        writer.close()
    return out


def legit_process(port: int, key: str, stop: Flag, floor: int, results: Queue[list[float]]) -> None:
    """The legitimate client in a process of its own, so that the attack's coroutines
    do not delay its timings."""
    results.put(asyncio.run(legit_latencies(port, key, stop, floor)))


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 100 else max(values)


async def under_attack(
    gateway: GatewayProcess, port: int, key: str, attack: Callable[[], Awaitable[str]], floor: int
) -> dict[str, object]:
    spawn = multiprocessing.get_context("spawn")
    stop, results = spawn.Event(), spawn.Queue()
    legit = spawn.Process(target=legit_process, args=(port, key, stop, floor, results))
    legit.start()
    started = time.perf_counter()
    detail = await attack()
    seconds = time.perf_counter() - started
    stop.set()
    latencies: list[float] = await asyncio.to_thread(results.get)
    legit.join()
    return {
        "seconds": round(seconds, 1),
        "detail": detail,
        "rss_mb": round(rss_mb(gateway.process.pid), 1),
        "legit_requests": len(latencies),
        "legit_p50_ms": round(statistics.median(latencies), 2),
        "legit_p99_ms": round(p99(latencies), 2),
    }


async def run(
    gateway: GatewayProcess, key: str, count: int, concurrency: int, slow_wave: int, attacks: tuple[str, ...]
) -> dict[str, object]:
    port = int(gateway.url.rsplit(":", 1)[1])

    async def junk_keys() -> str:
        def make() -> bytes:
            junk = f"llmgw-{secrets.token_hex(4)}-{secrets.token_urlsafe(32)}"
            return request({"authorization": "Bearer" + " " * PAD_BYTES + junk})

        share = count // concurrency
        await asyncio.gather(*(keepalive_worker(port, make, share, 401) for _ in range(concurrency)))
        return f"{share * concurrency} requests, all 401"

    async def session_ids() -> str:
        def make() -> bytes:
            return request(
                {"authorization": f"Bearer {key}", "x-session-id": secrets.token_hex(PAD_BYTES // 2)}
            )

        share = count // concurrency
        await asyncio.gather(*(keepalive_worker(port, make, share, 200) for _ in range(concurrency)))
        return f"{share * concurrency} requests, all 200"

    async def slow_bodies() -> str:
        answers: dict[str, int] = {}
        done = 0
        while done < count:
            wave = min(slow_wave, count - done)
            for answer in await asyncio.gather(*(slow_body(port, key) for _ in range(wave))):
                answers[answer] = answers.get(answer, 0) + 1
            done += wave
        return f"{done} connections in waves of {slow_wave}; answers {json.dumps(answers, sort_keys=True)}"

    # Warm up (allocator pools, first cache entries), then the idle figures.
    await keepalive_worker(port, lambda: request({"authorization": f"Bearer {key}"}), 500, 200)
    stop = asyncio.Event()
    stop.set()
    unloaded = await legit_latencies(port, key, stop, 1000)
    idle = rss_mb(gateway.process.pid)
    result: dict[str, object] = {
        "idle_rss_mb": round(idle, 1),
        "unloaded_p50_ms": round(statistics.median(unloaded), 2),
        "unloaded_p99_ms": round(p99(unloaded), 2),
    }
    for name, attack in (
        ("junk-keys", junk_keys),
        ("session-ids", session_ids),
        ("slow-bodies", slow_bodies),
    ):
        if name not in attacks:
            continue
        print(f"{name}: {count} ...", file=sys.stderr, flush=True)
        result[name] = await under_attack(gateway, port, key, attack, 200)
        print(f"  {result[name]}", file=sys.stderr, flush=True)
    return result


def setup_key(gateway: GatewayProcess) -> str:
    token = {"authorization": f"Bearer {gateway.admin_token()}"}
    with httpx.Client(base_url=gateway.admin_url, headers=token, timeout=30) as admin:
        for path, body in (
            ("/api/orgs", {"id": "o"}),
            ("/api/teams", {"id": "t", "org": "o"}),
            ("/api/projects", {"id": "p", "team": "t"}),
        ):
            admin.post(path, json=body).raise_for_status()
        key: str = admin.post("/api/keys", json={"project": "p"}).json()["key"]
    return key


def report(result: dict[str, object], args: argparse.Namespace) -> str:
    idle = float(str(result["idle_rss_mb"]))
    unloaded = float(str(result["unloaded_p99_ms"]))
    lines = [
        f"# Hostile input against one gateway ({datetime.now(UTC):%Y-%m-%d})",
        "",
        f"`bench/hardening/memory.py --count {args.count} --concurrency {args.concurrency} "
        f"--slow-wave {args.slow_wave} --body-timeout {args.body_timeout}`: auth on (SQLite), one sim "
        "engine, all on one machine shared with the client (and, here, with other work).",
        "",
        f"Idle RSS {idle} MB; legitimate client alone: p50 {result['unloaded_p50_ms']} ms, "
        f"p99 {unloaded} ms.",
        "",
        "| attack | count | took s | RSS MB | vs idle MB | legit p50 ms | legit p99 ms "
        "| p99 vs unloaded | what it got |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("junk-keys", "session-ids", "slow-bodies"):
        if name not in result:
            continue
        row = result[name]
        assert isinstance(row, dict)
        rss = float(row["rss_mb"])
        lines.append(
            f"| {name} | {args.count} | {row['seconds']} | {rss} | {rss - idle:+.1f} "
            f"| {row['legit_p50_ms']} | "
            f"{row['legit_p99_ms']} | {float(row['legit_p99_ms']) / unloaded:.2f}x | {row['detail']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--slow-wave", type=int, default=500, help="stalled bodies open at once")
    parser.add_argument("--body-timeout", default="2s", help="router.timeouts.body for the run")
    parser.add_argument(
        "--attacks", default="junk-keys,session-ids,slow-bodies", help="which to run, comma-separated"
    )
    parser.add_argument("--out", type=Path, help="write the markdown report here (and .json beside it)")
    args = parser.parse_args()
    engine = start_sim_engine("--model", "chat-a", "--decode-ms", "0", "--prefill-ms-per-token", "0")
    store = Path(f"/tmp/llmgw-bench-hardening-{secrets.token_hex(4)}.db")
    gateway = start_gateway(
        {
            "auth": {"enabled": True, "store": str(store)},
            "router": {"timeouts": {"body": args.body_timeout}},
            "endpoints": [{"id": "sim", "url": engine.url, "models": ["chat-a"], "engine": "sim"}],
        },
        timeout=120,
    )
    try:
        key = setup_key(gateway)
        result = asyncio.run(
            run(gateway, key, args.count, args.concurrency, args.slow_wave, tuple(args.attacks.split(",")))
        )
    finally:
        gateway.stop()
        engine.stop()
        store.unlink(missing_ok=True)
    text = report(result, args)
    print(text)
    if args.out is not None:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

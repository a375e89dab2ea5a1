"""The gateway's upstream client against aiohttp's and httpx's, side by side in one run.

Why: llmgw talks to its replicas with a client of its own (llmgw.upstream) rather than
a well-kept library, on the claim that the client is most of the gateway's cost per
request. This measures that claim: each client streams the same chat completions from
one `llmgw sim-engine` (a separate process, so this process's CPU time is the client's
alone), on uvloop as the gateway runs, at a fixed number of concurrent streams. The
clients take turns in rounds so that drift in the shared machine's load falls on all
of them alike. Reported per client: CPU per request (this process's user+system time
over the requests) and requests per second (wall), as the median over rounds.

    .venv/bin/python bench/router/client_choice.py --requests 2000 --concurrency 16 \
        --rounds 3 --out bench/results/router-client-choice.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import httpx
import orjson
import uvloop

from llmgw.testing.sim import start_sim_engine
from llmgw.upstream import OriginPool

PATH = "/v1/chat/completions"
Stream = Callable[[], Awaitable[int]]


def request_body(max_tokens: int) -> bytes:
    return orjson.dumps(
        {
            "model": "sim-model",
            "messages": [{"role": "user", "content": "Say something about gateways."}],
            "max_tokens": max_tokens,
            "stream": True,
        }
    )


def llmgw_client(base: str, body: bytes) -> tuple[Stream, Callable[[], Awaitable[None]]]:
    parts = urlsplit(base)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    pool = OriginPool(host, port, None)
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()

    async def stream() -> int:
        conn, _ = await pool.acquire(5.0)
        try:
            await conn.exchange(head, body)
            size = 0
            while (piece := await conn.read_available()) is not None:
                size += len(piece)
        except BaseException:
            conn.close()
            raise
        pool.release(conn)
        return size

    async def close() -> None:
        pool.close()

    return stream, close


def aiohttp_client(base: str, body: bytes, concurrency: int) -> tuple[Stream, Callable[[], Awaitable[None]]]:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))
    url = base + PATH
    headers = {"Content-Type": "application/json"}

    async def stream() -> int:
        size = 0
        async with session.post(url, data=body, headers=headers) as response:
            async for piece in response.content.iter_any():
                size += len(piece)
        return size

    return stream, session.close


def httpx_client(base: str, body: bytes, concurrency: int) -> tuple[Stream, Callable[[], Awaitable[None]]]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    client = httpx.AsyncClient(limits=limits, trust_env=False)
    url = base + PATH
    headers = {"Content-Type": "application/json"}

    async def stream() -> int:
        size = 0
        async with client.stream("POST", url, content=body, headers=headers) as response:
            async for piece in response.aiter_raw():
                size += len(piece)
        return size

    return stream, client.aclose


async def measure(stream: Stream, requests: int, concurrency: int) -> tuple[float, float, int]:
    """CPU µs per request, requests per second, and bytes of the last answer."""
    queue = iter(range(requests))
    last = 0

    async def worker() -> None:
        nonlocal last
        for _ in queue:
            last = await stream()

    await asyncio.gather(*(worker() for _ in range(min(concurrency, 4))))  # warm the connections
    queue = iter(range(requests))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return cpu / requests * 1e6, requests / wall, last


async def run(base: str, args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    body = request_body(args.max_tokens)
    makers = {
        "llmgw.upstream": lambda: llmgw_client(base, body),
        f"aiohttp {aiohttp.__version__}": lambda: aiohttp_client(base, body, args.concurrency),
        f"httpx {httpx.__version__}": lambda: httpx_client(base, body, args.concurrency),
    }
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in makers}
    for round_ in range(args.rounds):
        for name, make in makers.items():
            stream, close = make()
            try:
                cpu_us, rps, size = await measure(stream, args.requests, args.concurrency)
            finally:
                await close()
            if size == 0:
                raise SystemExit(f"{name}: the sim's answer was empty")
            results[name].append((cpu_us, rps))
            print(f"round {round_ + 1} {name}: {cpu_us:.0f} µs CPU/request, {rps:.0f} requests/s", flush=True)
    return results


def report(results: dict[str, list[tuple[float, float]]], args: argparse.Namespace, command: str) -> str:
    lines = [
        "# llmgw's upstream client against aiohttp's and httpx's",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other work (load average "
        f"{args.load:.1f} at the start), Python {platform.python_version()}, uvloop; "
        f"{args.requests} streamed chat completions of {args.max_tokens} tokens per client per round, "
        f"{args.concurrency} at a time, {args.rounds} rounds taking turns; the sim engine in its own "
        f"process at --time-scale {args.time_scale}. CPU is this process's (the client's) user+system "
        "time per request; medians over rounds.",
        "",
        "| client | CPU per request (µs) | requests/s | rounds (µs CPU) |",
        "|---|---:|---:|---|",
    ]
    for name, rows in results.items():
        cpu = statistics.median(r[0] for r in rows)
        rps = statistics.median(r[1] for r in rows)
        each = ", ".join(f"{r[0]:.0f}" for r in rows)
        lines.append(f"| {name} | {cpu:.0f} | {rps:.0f} | {each} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--time-scale", type=float, default=0.001)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.load = os.getloadavg()[0]
    command = " ".join([".venv/bin/python bench/router/client_choice.py", *sys.argv[1:]])
    with start_sim_engine("--model", "sim-model", "--time-scale", str(args.time_scale)) as sim:
        results = uvloop.run(run(sim.url.rstrip("/").removesuffix("/v1"), args))
    text = report(results, args, command)
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()

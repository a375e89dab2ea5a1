"""SCIM provisioning speed through HTTP: how long `llmgw server` (auth on, SQLite store,
`auth.scim` enabled) takes to create 1,000 Users as an identity provider sends them,
one POST each, with the admin API's `POST /api/users` on the same server as the
baseline (the same row written without SCIM's look-up, mapping and rendering).

Issue #22 asks for 1,000 SCIM creates in under 10 s on SQLite. Each run starts a fresh
server and store; the creates go one after another on one connection (how Okta pushes)
and, in a second batch, from `--concurrency` connections at once (how Entra ID's
provisioning service fans out). Then one group gets all of them in a single PATCH (a
first push of a large group), and a `userName eq` filter is timed (the look-up a
provider makes before each create).

    .venv/bin/python bench/identity/scim_create.py [--users 1000] [--concurrency 8] \
        [--markdown bench/results/identity-scim-create-DATE.md] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson

from llmgw.testing.server import GatewayProcess, running_gateway

USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
TOKEN = "bench-scim-token-" + "0" * 32


def _user(prefix: str, n: int) -> dict[str, Any]:
    """A User as Entra ID creates one (its documented request, trimmed of nothing)."""
    name = f"{prefix}{n:05d}@contoso.example"
    return {
        "schemas": [USER, "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"],
        "externalId": f"{prefix}-{n:08x}-0000-4000-8000-000000000000",
        "userName": name,
        "active": True,
        "emails": [{"primary": True, "type": "work", "value": name}],
        "meta": {"resourceType": "User"},
        "name": {"formatted": f"Person {n}", "familyName": str(n), "givenName": "Person"},
        "roles": [],
    }


async def _timed(
    client: httpx.AsyncClient, method: str, url: str, body: Any, headers: dict[str, str]
) -> float:
    started = time.perf_counter()
    answer = await client.request(method, url, json=body, headers=headers)
    elapsed = time.perf_counter() - started
    if answer.status_code >= 300:
        raise SystemExit(f"{method} {url} answered {answer.status_code}: {answer.text}")
    return elapsed


async def _batch(
    url: str, bodies: list[dict[str, Any]], headers: dict[str, str], concurrency: int
) -> tuple[float, list[float], float]:
    """Sends every body with POST from `concurrency` keep-alive connections; wall seconds,
    each request's latency, and this client's own CPU seconds. aiohttp, not httpx: at
    under a millisecond of CPU a request it leaves the machine to the server."""
    queue = [orjson.dumps(body) for body in reversed(bodies)]
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def worker() -> None:
            while queue:
                body = queue.pop()
                started = time.perf_counter()
                async with session.post(url, data=body) as answer:
                    text = await answer.read()
                    if answer.status >= 300:
                        raise SystemExit(f"POST {url} answered {answer.status}: {text!r}")
                latencies.append(time.perf_counter() - started)

        started, client_cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - started, latencies, time.process_time() - client_cpu


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _row(
    name: str, count: int, wall_s: float, latencies: list[float], cpu_s: float, client_cpu_s: float = 0.0
) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {
        "what": name,
        "requests": count,
        "wall_s": round(wall_s, 3),
        "per_s": round(count / wall_s, 1),
        "server_cpu_ms_per_request": round(cpu_s * 1000 / count, 2),
        "client_cpu_ms_per_request": round(client_cpu_s * 1000 / count, 2),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
    }


async def measure(gateway: GatewayProcess, users: int, concurrency: int) -> list[dict[str, Any]]:
    scim = {"authorization": f"Bearer {TOKEN}", "content-type": "application/scim+json"}
    admin = {"authorization": f"Bearer {gateway.admin_token()}"}
    pid = gateway.process.pid
    rows = []
    cpu = cpu_seconds(pid)
    wall, lat, mine = await _batch(
        gateway.admin_url + "/api/users",
        [
            {"id": f"base{n:05d}@contoso.example", "email": f"base{n:05d}@contoso.example"}
            for n in range(users)
        ],
        admin,
        1,
    )
    cpu, used = cpu_seconds(pid), cpu_seconds(pid) - cpu
    rows.append(_row("baseline: admin API POST /api/users, 1 connection", users, wall, lat, used, mine))
    wall, lat, mine = await _batch(
        gateway.url + "/scim/v2/Users", [_user("seq", n) for n in range(users)], scim, 1
    )
    cpu, used = cpu_seconds(pid), cpu_seconds(pid) - cpu
    rows.append(_row("SCIM POST /Users, 1 connection", users, wall, lat, used, mine))
    wall, lat, mine = await _batch(
        gateway.url + "/scim/v2/Users", [_user("par", n) for n in range(users)], scim, concurrency
    )
    cpu, used = cpu_seconds(pid), cpu_seconds(pid) - cpu
    rows.append(_row(f"SCIM POST /Users, {concurrency} connections", users, wall, lat, used, mine))
    async with httpx.AsyncClient(timeout=60) as client:
        cpu = cpu_seconds(pid)
        lookups = [
            await _timed(
                client,
                "GET",
                gateway.url + f'/scim/v2/Users?filter=userName eq "seq{n:05d}@contoso.example"',
                None,
                scim,
            )
            for n in range(0, users, max(1, users // 200))
        ]
        rows.append(
            _row(
                f"SCIM GET /Users?filter=userName eq (of {3 * users} people)",
                len(lookups),
                sum(lookups),
                lookups,
                cpu_seconds(pid) - cpu,
            )
        )
        made = await client.post(
            gateway.url + "/scim/v2/Groups",
            json={"schemas": [GROUP], "displayName": "everyone"},
            headers=scim,
        )
        group_id = made.json()["id"]
        listing = await client.get(gateway.url + "/scim/v2/Users?count=200", headers=scim)
        total = listing.json()["totalResults"]
        ids: list[str] = []
        for start in range(1, total + 1, 200):
            page = await client.get(
                gateway.url + f"/scim/v2/Users?startIndex={start}&count=200", headers=scim
            )
            ids += [u["id"] for u in page.json()["Resources"] if u["id"].startswith("seq")]
        patch = {
            "schemas": [PATCH],
            "Operations": [{"op": "Add", "path": "members", "value": [{"value": i} for i in ids]}],
        }
        cpu = cpu_seconds(pid)
        took = await _timed(client, "PATCH", gateway.url + f"/scim/v2/Groups/{group_id}", patch, scim)
        used = cpu_seconds(pid) - cpu
        rows.append(_row(f"SCIM PATCH /Groups: add {len(ids)} members at once", 1, took, [took], used))
    return rows


def markdown(command: str, rows: list[dict[str, Any]]) -> str:
    lines = [
        "# SCIM provisioning through HTTP (SQLite)",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end of the run "
        "(shared with other work). Fresh server and store per run; loopback.",
        "",
        "| what | requests | wall s | per s | p50 ms | p99 ms | server CPU ms/req | client CPU ms/req |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['what']} | {r['requests']} | {r['wall_s']} | {r['per_s']} | {r['p50_ms']} | {r['p99_ms']} "
        f"| {r['server_cpu_ms_per_request']} | {r['client_cpu_ms_per_request']} |"
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmgw-scim-bench-") as folder:
        token_file = Path(folder) / "scim-token"
        token_file.write_text(TOKEN + "\n")
        config = {
            "auth": {
                "enabled": True,
                "store": str(Path(folder) / "llmgw.db"),
                "scim": {"enabled": True, "token_file": str(token_file)},
            },
            "endpoints": [{"id": "none", "url": "http://127.0.0.1:9", "models": ["unused"], "engine": "sim"}],
        }
        with running_gateway(config, timeout=60) as gateway:
            rows = asyncio.run(measure(gateway, args.users, args.concurrency))
    command = " ".join([".venv/bin/python", "bench/identity/scim_create.py", *sys.argv[1:]])
    text = markdown(command, rows)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps({"command": command, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()

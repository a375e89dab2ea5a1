"""How long the operator dashboard takes to build each page on the server: the admin
API's reads (`AdminApi.handle`, as the page makes them) plus the template, for a store
of `--keys` keys (10,000 by default) in one project, a few organisations, teams and
budgets, 1,000 audit entries, and traffic counted for a handful of models. No sockets: what is timed is the
server's own work for one page, `Dashboard.context(page)` then `Dashboard.render`.

Each page is built `-n` times in each of `--rounds` rounds; the figures are the
rounds' medians of the median and p95. Results as Markdown on stdout (and `--out`).

    .venv/bin/python bench/web/dashboard_render.py [--keys 10000] [-n 30] [--rounds 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from llmgw.admin.api import AdminApi
from llmgw.auth.keys import new_key
from llmgw.config import Settings
from llmgw.router.metrics import GatewayMetrics
from llmgw.store import KeyRow, Scope, Store
from llmgw.store.audit import AuditEntry
from llmgw.web.dashboard import PAGES, Dashboard

AUDIT_ENTRIES = 1000
MODELS = ("chat-a", "chat-b", "embed-a", "coder-7b", "vision-12b")


async def _seed(store: Store, keys: int) -> None:
    now = time.time()
    for o in range(3):
        await store.tenancy.create(Scope(kind="org", id=f"org{o}", created_at=now, updated_at=now))
        for t in range(3):
            team = f"org{o}-team{t}"
            await store.tenancy.create(
                Scope(kind="team", id=team, parent=f"org{o}", created_at=now, updated_at=now)
            )
            await store.tenancy.create(
                Scope(
                    kind="project",
                    id=f"{team}-p",
                    parent=team,
                    budget_micros=50_000_000,
                    created_at=now,
                    updated_at=now,
                )
            )
    for a in range(AUDIT_ENTRIES):
        await store.audit.record(
            AuditEntry(now + a, "operator (bearer token)", "key.revoke", f"key:{a}", "done")
        )
    for k in range(keys):
        made = new_key()
        row = KeyRow(id=made.id, hash=made.hash, name=f"k{k}", project_id="org0-team0-p", created_at=now + k)
        await store.keys.create(row)


def _traffic() -> GatewayMetrics:
    metrics = GatewayMetrics()
    for i, model in enumerate(MODELS):
        for n in range(200):
            metrics.answered("/v1/chat/completions", model, 200 if n % 50 else 502, 0.2 + i / 10)
            metrics.first_token(model, 0.05 * (1 + n % 7))
            metrics.counted_tokens(model, 120, 40)
    return metrics


def _summary(samples_ns: list[int]) -> tuple[float, float]:
    ordered = sorted(samples_ns)
    return ordered[len(ordered) // 2] / 1e6, ordered[min(int(len(ordered) * 0.95), len(ordered) - 1)] / 1e6


async def _time(dashboard: Dashboard, page: str, n: int) -> list[int]:
    samples = []
    for _ in range(n):
        start = time.perf_counter_ns()
        body = dashboard.render(page, await dashboard.context(page))
        samples.append(time.perf_counter_ns() - start)
        assert body.startswith(b"<!doctype html>")
    return samples


async def main(keys: int, n: int, rounds: int, out: Path | None) -> None:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        location = str(Path(folder) / "llmgw.db")
        store = await Store.open(location)
        try:
            await _seed(store, keys)
            settings = Settings(auth={"enabled": True, "store": location})
            api = AdminApi(settings, store, "token")
            dashboard = Dashboard(settings, "token", api.handle, _traffic(), store.audit)
            dashboard.models = lambda: [{"id": m} for m in MODELS]
            size = {page: len(dashboard.render(page, await dashboard.context(page))) for page in PAGES}
            figures: dict[str, list[tuple[float, float]]] = {page: [] for page in PAGES}
            for _ in range(rounds):
                for page in PAGES:
                    figures[page].append(_summary(await _time(dashboard, page, n)))
        finally:
            await store.close()
    lines = [
        f"# Dashboard render time, {keys} keys",
        "",
        f"`bench/web/dashboard_render.py --keys {keys} -n {n} --rounds {rounds}` on "
        f"{platform.machine()} Python {platform.python_version()}, SQLite store. Server-side time "
        "of one page (the admin API's reads and the template), no sockets. Target: under 150 ms. "
        f"Load average (1 min) {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, "
        f"on {os.cpu_count()} CPUs shared with other work.",
        "",
        "| page | median ms | p95 ms | HTML bytes |",
        "|---|---:|---:|---:|",
    ]
    for page in PAGES:
        median = statistics.median(f[0] for f in figures[page])
        p95 = statistics.median(f[1] for f in figures[page])
        lines.append(f"| {page} | {median:.1f} | {p95:.1f} | {size[page]} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if out is not None:
        out.write_text(text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("-n", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    asyncio.run(main(args.keys, args.n, args.rounds, args.out))

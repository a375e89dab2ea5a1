"""What deciding by roles costs: `llmgw.identity.roles.decide` alone (pure), and a whole
admin API list answered to a signed-in person (the route checked, the tenancy tree
read, the list cut down) against the same list answered to the operator (baseline,
same run, no checks).

A SQLite store in a temporary folder with `--teams` teams of 5 projects each, 4 keys a
project; the person is admin of one team. Each call is `AdminApi.handle("GET",
"/api/keys", ...)` in process (no socket), timed alone (perf_counter_ns), in `--rounds`
rounds; the figures are the rounds' medians.

    .venv/bin/python bench/identity/authz.py [-n 200] [--rounds 5] [--teams 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from llmgw.admin.api import AdminApi
from llmgw.auth.keys import new_key
from llmgw.config import Settings
from llmgw.identity.roles import OPERATOR, Actor, Tree, decide
from llmgw.store import KeyRow, Scope, Store
from llmgw.store.people import Role

DECIDE_CALLS = 100_000


def _summary(samples_ns: list[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)
    return {
        "mean_us": statistics.fmean(ordered) / 1000,
        "p50_us": ordered[len(ordered) // 2] / 1000,
        "p99_us": ordered[int(len(ordered) * 0.99)] / 1000,
    }


async def _seed(store: Store, teams: int) -> None:
    now = time.time()
    await store.tenancy.create(Scope(kind="org", id="acme", created_at=now, updated_at=now))
    for t in range(teams):
        await store.tenancy.create(
            Scope(kind="team", id=f"t{t}", parent="acme", created_at=now, updated_at=now)
        )
        for p in range(5):
            project = f"t{t}-p{p}"
            await store.tenancy.create(
                Scope(kind="project", id=project, parent=f"t{t}", created_at=now, updated_at=now)
            )
            for k in range(4):
                made = new_key()
                await store.keys.create(
                    KeyRow(id=made.id, hash=made.hash, name=f"k{k}", project_id=project, created_at=now)
                )


def _decide(n: int) -> list[int]:
    tree = Tree(
        {f"t{t}-p{p}": f"t{t}" for t in range(20) for p in range(5)}, {f"t{t}": "acme" for t in range(20)}
    )
    actor = Actor("tina", (Role("team", "t3", "admin"), Role("project", "t9-p1", "member")))
    targets = [tree.target("project", f"t{t}-p{p}") for t in range(20) for p in range(5)]
    samples = []
    for i in range(n):
        target = targets[i % len(targets)]
        start = time.perf_counter_ns()
        decide(actor, "keys", target)
        samples.append(time.perf_counter_ns() - start)
    return samples


async def _list(api: AdminApi, actor: Actor, n: int) -> list[int]:
    samples = []
    for _ in range(n):
        start = time.perf_counter_ns()
        status, _ = await api.handle("GET", "/api/keys", {}, b"", actor=actor)
        samples.append(time.perf_counter_ns() - start)
        assert status == 200
    return samples


async def main(n: int, rounds: int, teams: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        location = str(Path(folder) / "llmgw.db")
        store = await Store.open(location)
        try:
            await _seed(store, teams)
            api = AdminApi(Settings(auth={"enabled": True, "store": location}), store, "token")
            person = Actor("tina", (Role("team", "t3", "admin"),))
            _, mine = await api.handle("GET", "/api/keys", {}, b"", actor=person)
            _, every = await api.handle("GET", "/api/keys", {}, b"", actor=OPERATOR)
            print(f"keys: {len(every['data'])} in all, {len(mine['data'])} the team admin may manage")
            results: dict[str, list[dict[str, float]]] = {"decide": [], "operator": [], "person": []}
            for _ in range(rounds):
                results["decide"].append(_summary(_decide(DECIDE_CALLS)))
                results["operator"].append(_summary(await _list(api, OPERATOR, n)))
                results["person"].append(_summary(await _list(api, person, n)))
        finally:
            await store.close()
    print(f"{'path':<9} {'mean µs':>10} {'p50 µs':>10} {'p99 µs':>10}   (median of {rounds} rounds)")
    for path, runs in results.items():
        row = {k: statistics.median(r[k] for r in runs) for k in ("mean_us", "p50_us", "p99_us")}
        print(f"{path:<9} {row['mean_us']:>10.2f} {row['p50_us']:>10.2f} {row['p99_us']:>10.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=200, help="list calls per round and path")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--teams", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.rounds, args.teams))

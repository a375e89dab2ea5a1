"""What one control-plane decision costs on a large cluster: 200 models on 1,000
simulated nodes.

Two passes of the pure `llmgw.control.decisions.plan.plan`, each repeated:

1. cold: nothing runs yet, every model below its floor is placed (the control plane's
   first pass after an install or a full outage);
2. steady: the same cluster with every replica of the cold pass running, so nothing
   changes (what every `control.interval` costs in the common case).

Beside them, a naive first fit over the same cold world, in the same run: each replica
scans every node in id order and recounts that node's free devices and cores from the
replicas placed so far, with no index by class or label and no scoring. It places the
same requests under the same hard constraints (class, free devices, cores, labels,
engine), so the difference is what indexing and incremental accounting buy.

The world (deterministic, seeded): nodes of 8×h100-80g, 4×a100-80g, A100s in MIG mode,
and CPU-only boxes, labelled by site, room, row and rack; models with GPU profiles of
tp 1 to 8, a few two-node ones kept within a rack, MIG and CPU profiles, profiles by
`gpu:` need, schedule windows, on-demand models with a waiting request, all three
classes, node selectors and weights already on some nodes.

    .venv/bin/python bench/control/placement.py [--cold-rounds 9] [--steady-rounds 41]

Writes bench/results/control-placement.md and .json. Timings are wall clock
(`time.perf_counter`) of the call alone; the world is built before the clock starts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from llmgw.catalog import Catalog, Model
from llmgw.control.decisions.cluster import Assignment, ModelDemand, NodeView, ReplicaView
from llmgw.control.decisions.plan import Plan, plan
from llmgw.protocol.inventory import GPU, Inventory, MigDevice, WeightsEntry

ROOT = Path(__file__).resolve().parents[2]
GB = 1 << 30
NOW = dt.datetime(2025, 6, 2, 10, 0, tzinfo=dt.UTC).timestamp()  # a Monday morning
TZ = ZoneInfo("Europe/Istanbul")
ENGINES = {"vllm": "0.11.1", "llamacpp": "b6000", "sim": "0.1.0"}


# --- the world ------------------------------------------------------------------------


def _cards(gpu_class: str, count: int) -> list[GPU]:
    return [
        GPU(
            index=i,
            uuid=f"GPU-{i}",
            name=gpu_class,
            gpu_class=gpu_class,
            memory_mib=81920,
            power_limit_watts=700,
        )
        for i in range(count)
    ]


def _mig_a100s(count: int) -> list[GPU]:
    """A100 80 GB cards each cut into seven 1g.10gb instances."""
    return [
        GPU(
            index=i,
            uuid=f"GPU-{i}",
            name="a100-80g",
            gpu_class="a100-80g",
            memory_mib=81920,
            power_limit_watts=400,
            mig_enabled=True,
            mig_devices=tuple(
                MigDevice(
                    uuid=f"MIG-{i}-{n}",
                    profile="1g.10gb",
                    gpu_class="a100-80g-mig-1g.10gb",
                    memory_gb=10,
                    device=n,
                )
                for n in range(7)
            ),
        )
        for i in range(count)
    ]


def build_nodes(count: int, models: Sequence[Model], rng: random.Random) -> list[NodeView]:
    out: list[NodeView] = []
    sources = [m.source for m in models]
    for i in range(count):
        kind = i % 20
        if kind < 8:
            gpus, cores = _cards("h100-80g", 8), 128
        elif kind < 13:
            gpus, cores = _cards("a100-80g", 4), 64
        elif kind < 15:
            gpus, cores = _mig_a100s(2), 64
        else:
            gpus, cores = [], 32
        rack = i // 16
        labels = {
            "llmgw.io/site": f"s{rack // 40}",
            "llmgw.io/room": f"s{rack // 40}-room{rack // 10}",
            "llmgw.io/row": f"row{rack // 4}",
            "llmgw.io/rack": f"r{rack:03d}",
            "tier": "large" if i % 7 == 0 else "general",
        }
        # Each node holds the weights of a few models, as a cluster that has run a while does.
        held = {rng.choice(sources).replace("/", "--") for _ in range(3)}
        inventory = Inventory(
            hostname=f"node-{i:04d}",
            llmgw_version="0.1.0",
            cpu_cores=cores,
            memory_total_bytes=1024 * GB if gpus else 256 * GB,
            memory_available_bytes=900 * GB,
            weights_dir="/var/lib/llmgw/weights",
            disk_free_bytes=4000 * GB,
            disk_total_bytes=8000 * GB,
            gpus=tuple(gpus),
            labels=labels,
            engines=ENGINES,
            weights=tuple(WeightsEntry(name=w, size_bytes=GB, kind="dir") for w in sorted(held)),
        )
        out.append(NodeView(id=f"node-{i:04d}", inventory=inventory, status="ready"))
    return out


def build_models(count: int, rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(count):
        kind = i % 20
        scaling: dict[str, Any] = {"min": rng.randint(1, 3)}
        extra: dict[str, Any] = {}
        if kind < 8:
            tp = rng.choice([1, 2, 4, 8])
            profiles = [
                {"name": "h100", "gpu_class": "h100-80g", "tp": tp, "priority": 2},
                {
                    "name": "a100",
                    "gpu_class": "a100-80g",
                    "tp": min(tp * 2, 4) if tp < 8 else 4,
                    "priority": 1,
                },
            ]
        elif kind < 11:
            profiles = [{"name": "any", "gpu": {"min_memory_gb": 70}, "tp": rng.choice([1, 2])}]
        elif kind < 12:
            profiles = [
                {
                    "name": "pair",
                    "gpu_class": "h100-80g",
                    "tp": 16,
                    "nodes": 2,
                    "gpus_per_node": 8,
                    "keep_within": "rack",
                }
            ]
            scaling = {"min": 1}
        elif kind < 14:
            profiles = [{"name": "mig", "gpu_class": "a100-80g-mig-1g.10gb"}]
        else:
            profiles = [
                {"name": "cpu", "engine": "llamacpp", "cpu_cores": rng.choice([4, 8]), "min_memory_gb": 16}
            ]
            if kind == 19:
                profiles[0]["node_selector"] = {"tier": "large"}
        if i % 10 == 3:
            scaling = {"min": 0, "max": 2}  # on demand; half of them asked for right now
        elif i % 10 == 5:
            scaling["schedule"] = [
                {"days": ["weekdays"], "from": "08:00", "to": "18:00", "min": scaling["min"] + 1}
            ]
            scaling["prewarm"] = "30m"
        if i % 9 == 0:
            extra["class"] = "critical"
        elif i % 9 == 4:
            extra["class"] = "opportunistic"
        out.append(
            {
                "name": f"model-{i:03d}",
                "source": f"org{i % 17}/model-{i:03d}",
                "profiles": [{"engine": "vllm", **p} for p in profiles],
                "scaling": scaling,
                **extra,
            }
        )
    return out


def demand_for(models: Sequence[Model]) -> dict[str, ModelDemand]:
    return {
        m.name: ModelDemand(waiting=n % 2 == 0, last_request_at=NOW - 30)
        for n, m in enumerate(m for m in models if m.on_demand)
    }


def running(p: Plan) -> list[ReplicaView]:
    return [
        ReplicaView(s.replica_id, s.model, s.profile, s.assignments, "ready", NOW - 600 + n)
        for n, s in enumerate(p.starts)
    ]


# --- the naive baseline -----------------------------------------------------------------


def naive_first_fit(catalog: Catalog, nodes: Sequence[NodeView], demand: dict[str, ModelDemand]) -> int:
    """First fit with no index: every replica scans every node in id order and recounts
    that node's free devices and cores from the replicas placed so far. Returns the
    replicas placed."""
    placed: list[tuple[str, tuple[Assignment, ...]]] = []
    local = dt.datetime.fromtimestamp(NOW, dt.UTC).astimezone(TZ)
    every_class = _all_classes(nodes)
    for m in catalog.models():
        low, _ = m.scaling.bounds(local)
        wanted = low or (1 if demand.get(m.name, ModelDemand()).waiting else 0)
        variants = [
            p if p.cpu_only or p.gpu is None else p.for_class(c)
            for p in sorted(m.profiles, key=lambda p: -p.priority)
            for c in ([""] if p.cpu_only or p.gpu is None else p.classes_for(every_class))
        ]
        for _ in range(wanted):
            for variant in variants:
                found = _first_fit(variant, nodes, placed)
                if found is not None:
                    placed.append((m.name, found))
                    break
    return len(placed)


def _all_classes(nodes: Sequence[NodeView]) -> list[str]:
    return sorted({d.gpu_class for n in nodes for d in n.inventory.devices()})


def _first_fit(
    p: Any, nodes: Sequence[NodeView], placed: list[tuple[str, tuple[Assignment, ...]]]
) -> tuple[Assignment, ...] | None:
    chosen: list[Assignment] = []
    for node in nodes:
        inv = node.inventory
        if any(inv.labels.get(k) != v for k, v in p.node_selector.items()) or p.engine not in inv.engines:
            continue
        taken = {d for _, parts in placed for a in parts if a.node_id == node.id for d in a.devices}
        cores = {c for _, parts in placed for a in parts if a.node_id == node.id for c in a.cpu_cores}
        if p.cpu_only:
            free_cores = [c for c in range(inv.cpu_cores) if c not in cores]
            if len(free_cores) >= p.cpu_cores:
                return (Assignment(node.id, (), tuple(free_cores[: p.cpu_cores])),)
            continue
        free = [
            d.visible_id for d in inv.devices() if d.gpu_class == p.gpu_class and d.visible_id not in taken
        ]
        if len(free) >= p.gpus_per_node:
            chosen.append(Assignment(node.id, tuple(free[: p.gpus_per_node])))
            if len(chosen) == max(p.nodes, 1):
                return tuple(chosen)
    return None


# --- measuring -------------------------------------------------------------------------


def timed(rounds: int, call: Callable[[], object]) -> tuple[list[float], object]:
    out: list[float] = []
    result: object = None
    for _ in range(rounds):
        start = time.perf_counter()
        result = call()
        out.append((time.perf_counter() - start) * 1000)
    return out, result


def summary(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {
        "median_ms": round(statistics.median(ordered), 2),
        "p90_ms": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 2),
        "min_ms": round(ordered[0], 2),
        "max_ms": round(ordered[-1], 2),
        "rounds": len(ordered),
    }


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--nodes", type=int, default=1000)
    args.add_argument("--models", type=int, default=200)
    args.add_argument("--cold-rounds", type=int, default=9)
    args.add_argument("--steady-rounds", type=int, default=41)
    args.add_argument("--naive-rounds", type=int, default=3)
    args.add_argument("--seed", type=int, default=8)
    args.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "control-placement")
    opts = args.parse_args()

    rng = random.Random(opts.seed)
    catalog = Catalog.build([Model.model_validate(d) for d in build_models(opts.models, rng)])
    models = catalog.models()
    nodes = build_nodes(opts.nodes, models, rng)
    demand = demand_for(models)
    ids = iter(range(10**9))

    def decide(replicas: list[ReplicaView]) -> Plan:
        return plan(catalog, nodes, replicas, demand, NOW, tz=TZ, new_id=lambda m: f"{m}-{next(ids)}")

    cold_ms, cold = timed(opts.cold_rounds, lambda: decide([]))
    assert isinstance(cold, Plan)
    replicas = running(cold)
    steady_ms, steady = timed(opts.steady_rounds, lambda: decide(replicas))
    assert isinstance(steady, Plan)
    assert steady.empty, "the steady pass should change nothing"
    naive_ms, naive_placed = timed(opts.naive_rounds, lambda: naive_first_fit(catalog, nodes, demand))
    unplaced = sorted(
        m for m, lines in cold.explanations.items() if any(" no " in s or "only" in s for s in lines[1:])
    )
    result = {
        "world": {
            "nodes": len(nodes),
            "models": len(models),
            "devices": sum(len(n.inventory.devices()) for n in nodes),
            "replicas_started_cold": len(cold.starts),
            "multi_node_replicas": sum(len(s.assignments) > 1 for s in cold.starts),
            "preemptions_cold": sum(len(s.preempts) for s in cold.starts),
            "models_short_after_cold": unplaced,
            "naive_replicas_placed": naive_placed,
        },
        "cold": summary(cold_ms),
        "steady": summary(steady_ms),
        "naive_first_fit_cold": summary(naive_ms),
        "goals": {"cold_ms": 1000, "steady_ms": 50},
    }
    meta = {
        "command": " ".join(
            shlex.quote(a) for a in [".venv/bin/python", "bench/control/placement.py", *sys.argv[1:]]
        ),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.with_suffix(".json").write_text(json.dumps({"meta": meta, **result}, indent=1) + "\n")
    opts.out.with_suffix(".md").write_text(report(meta, result))
    print(json.dumps(result, indent=1))
    print(f"wrote {opts.out.with_suffix('.md')} and .json")


def _row(label: str, s: dict[str, float], goal_ms: float | None) -> str:
    goal = "—" if goal_ms is None else f"under {goal_ms:g} ms: {'met' if s['p90_ms'] < goal_ms else 'MISSED'}"
    cells = [
        label,
        *(f"{s[k]} ms" for k in ("median_ms", "p90_ms", "min_ms", "max_ms")),
        str(s["rounds"]),
        goal,
    ]
    return "| " + " | ".join(cells) + " |"


def report(meta: dict[str, Any], r: dict[str, Any]) -> str:
    w = r["world"]
    rows = "\n".join(
        [
            _row("cold: place everything", r["cold"], 1000),
            _row("steady: nothing to change", r["steady"], 50),
            _row("naive first fit, cold (baseline)", r["naive_first_fit_cold"], None),
        ]
    )
    return f"""# Control plane: placement on 1,000 nodes

`{meta["command"]}`

{meta["date"]} · Python {meta["python"]} ({meta["implementation"]}, {meta["machine"]}) ·
{meta["cpus"]} CPUs · load average {", ".join(map(str, meta["load_average"]))} at the end.

World: {w["nodes"]} nodes ({w["devices"]} devices: whole H100s and A100s, MIG instances),
{w["models"]} models; the cold pass started {w["replicas_started_cold"]} replicas
({w["multi_node_replicas"]} of them on two nodes, {w["preemptions_cold"]} preemptions).
Models left short after it: {len(w["models_short_after_cold"])}.

| pass | median | p90 | min | max | rounds | goal (p90) |
|---|---|---|---|---|---|---|
{rows}

The naive first fit placed {w["naive_replicas_placed"]} replicas with the hard
constraints only (class, free devices, cores, labels, engine); it scores nothing,
checks no memory, disk or power, preempts nothing and explains nothing, so it is a
floor for what an unindexed scan costs, not a like-for-like placement.

Wall clock of the `plan` call alone (`time.perf_counter`), the world built beforehand.
See bench/control/README.md for what each pass does.
"""


if __name__ == "__main__":
    main()

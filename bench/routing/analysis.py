"""Figures of one target's run, from the client's records and the sims' own accounts.

Only measured requests (sent after the warm-up) count. The client gives TTFT, total
time and errors; each response id names the replica that answered; the sims' records
(joined on that id) give the cached tokens and the simulated TTFT of each request, and
their counters before and after the measured window give its prefix-cache hit rate.
From these: where each group's requests went (a group kept on one replica keeps its
system prompt cached; one spread over several has it prefilled on each), how busy each
replica's batch was, and how much of the client's TTFT the sims did not simulate (the
gateway, the loopback, the client and the machine's other work).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from client import Outcome


def pct(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile (nearest rank) of `values`, None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, math.ceil(p / 100 * len(ordered)) - 1)
    return ordered[rank]


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 1)


def _hit_rate(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    b, a = before["prefix_cache"], after["prefix_cache"]
    queries = a["queries_tokens"] - b["queries_tokens"]
    hits = a["hits_tokens"] - b["hits_tokens"]
    return {
        "queries_tokens": queries,
        "hits_tokens": hits,
        "hit_rate": round(hits / queries, 4) if queries else None,
        "evictions": a["evictions"] - b["evictions"],
        "hit_rate_whole_run": round(a["hits_tokens"] / a["queries_tokens"], 4)
        if a["queries_tokens"]
        else None,
    }


def analyse(
    outcomes: Sequence[Outcome],
    *,
    replica_of: Any,
    states_before: list[dict[str, Any]],
    states_after: list[dict[str, Any]],
    sim_records: list[list[dict[str, Any]]],
    measure_s: float,
    max_seqs: int,
    max_tokens: int,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The summary of one target's run (see the module docstring), and one row per
    request: the client's record with the replica and the sim's account joined in."""
    measured = [o for o in outcomes if o.phase == "measure"]
    ok = [o for o in measured if o.ok]
    ttft = [o.ttft_s for o in ok if o.ttft_s is not None]
    total = [o.total_s for o in ok if o.total_s is not None]
    errors = Counter(o.error.split(":")[0] if o.error else f"status {o.status}" for o in measured if not o.ok)
    by_id = {rec["id"]: (i, rec) for i, records in enumerate(sim_records) for rec in records}
    replicas = len(sim_records)
    per_replica: list[dict[str, Any]] = [
        {"requests": 0, "busy_s": 0.0, "groups": Counter()} for _ in range(replicas)
    ]
    group_replicas: dict[int, Counter[int]] = defaultdict(Counter)
    sim_ttft: list[float] = []
    sim_queue: list[float] = []
    overhead: list[float] = []
    unknown = 0
    rows = []
    for o in outcomes:
        found = by_id.get(o.response_id)
        rec = found[1] if found else {}
        rows.append(
            {
                **o.row(),
                "replica": found[0] if found else replica_of(o.response_id),
                "cached_tokens": rec.get("cached_tokens"),
                "sim_ttft_s": rec.get("ttft_s"),
                "sim_queue_s": rec.get("queue_s"),
            }
        )
    for o in ok:
        found = by_id.get(o.response_id)
        replica = found[0] if found else replica_of(o.response_id)
        if replica is None:
            unknown += 1
            continue
        group_replicas[o.group][replica] += 1
        slot = per_replica[replica]
        slot["requests"] += 1
        slot["groups"][o.group] += 1
        if found is None:
            continue
        rec = found[1]
        if rec.get("ttft_s") is not None and o.ttft_s is not None:
            sim_ttft.append(rec["ttft_s"])
            overhead.append(o.ttft_s - rec["ttft_s"])
        if rec.get("queue_s") is not None:
            sim_queue.append(rec["queue_s"])
        if rec.get("admitted_at") is not None and rec.get("last_token_at") is not None:
            slot["busy_s"] += rec["last_token_at"] - rec["admitted_at"]
    groups = []
    for group in sorted(group_replicas):
        counts = group_replicas[group]
        main, main_n = counts.most_common(1)[0]
        groups.append(
            {
                "group": group,
                "requests": sum(counts.values()),
                "main_replica": main,
                "main_share": round(main_n / sum(counts.values()), 3),
                "replicas_used": len(counts),
            }
        )
    replica_rows = []
    for i, slot in enumerate(per_replica):
        owned = [g["group"] for g in groups if g["main_replica"] == i]
        replica_rows.append(
            {
                "replica": i,
                "requests": slot["requests"],
                "groups_owned": owned,
                "groups_seen": len(slot["groups"]),
                "batch_busy": round(slot["busy_s"] / (max_seqs * measure_s), 3) if measure_s else None,
                **_hit_rate(states_before[i], states_after[i]),
            }
        )
    queries = sum(r["queries_tokens"] for r in replica_rows)
    hits = sum(r["hits_tokens"] for r in replica_rows)
    summary = {
        "measured": len(measured),
        "ok": len(ok),
        "errors": len(measured) - len(ok),
        "error_kinds": dict(errors),
        "errors_whole_run": sum(1 for o in outcomes if not o.ok),
        "ttft_ms": {
            "p50": _ms(pct(ttft, 50)),
            "p90": _ms(pct(ttft, 90)),
            "p99": _ms(pct(ttft, 99)),
            "mean": _ms(sum(ttft) / len(ttft)) if ttft else None,
        },
        "total_ms": {"p50": _ms(pct(total, 50)), "p90": _ms(pct(total, 90)), "p99": _ms(pct(total, 99))},
        "throughput": {
            "requests_per_s": round(len(ok) / measure_s, 2) if measure_s else None,
            "output_tokens_per_s": round(len(ok) * max_tokens / measure_s, 1) if measure_s else None,
        },
        "client_lag_ms": {
            "p99": _ms(pct([o.lag_s for o in measured], 99)),
            "max": _ms(max((o.lag_s for o in measured), default=None)),
        },
        "prefix_cache": {
            "hit_rate": round(hits / queries, 4) if queries else None,
            "hits_tokens": hits,
            "queries_tokens": queries,
            "evictions": sum(r["evictions"] for r in replica_rows),
        },
        "sim_ttft_ms": {
            "p50": _ms(pct(sim_ttft, 50)),
            "p90": _ms(pct(sim_ttft, 90)),
            "p99": _ms(pct(sim_ttft, 99)),
        },
        "sim_queue_ms": {
            "p50": _ms(pct(sim_queue, 50)),
            "p90": _ms(pct(sim_queue, 90)),
            "p99": _ms(pct(sim_queue, 99)),
        },
        "unsimulated_ttft_ms": {
            "p50": _ms(pct(overhead, 50)),
            "p90": _ms(pct(overhead, 90)),
            "p99": _ms(pct(overhead, 99)),
        },
        "routing": {
            "groups_on_one_replica": sum(1 for g in groups if g["replicas_used"] == 1),
            "groups_split": sum(1 for g in groups if g["main_share"] < 0.95),
            "mean_main_share": round(sum(g["main_share"] for g in groups) / len(groups), 3)
            if groups
            else None,
            "unattributed": unknown,
        },
        "replicas": replica_rows,
        "groups": groups,
    }
    return summary, rows


def pooled(name: str, rows: Sequence[dict[str, Any]], entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One target's figures over all its rounds: percentiles of every measured request
    together, and each round's p90 beside them."""
    ok = [r for r in rows if r["phase"] == "measure" and r["status"] == 200 and not r["error"]]
    ttft = [r["ttft_s"] for r in ok if r["ttft_s"] is not None]
    sim = [r["sim_ttft_s"] for r in ok if r["sim_ttft_s"] is not None]
    runs = [e for e in entries if e["name"] == name and "summary" in e]
    queries = sum(e["summary"]["prefix_cache"]["queries_tokens"] for e in runs)
    hits = sum(e["summary"]["prefix_cache"]["hits_tokens"] for e in runs)
    return {
        "name": name,
        "rounds": len(runs),
        "measured": sum(1 for r in rows if r["phase"] == "measure"),
        "errors": sum(1 for r in rows if r["phase"] == "measure") - len(ok),
        "ttft_ms": {"p50": _ms(pct(ttft, 50)), "p90": _ms(pct(ttft, 90)), "p99": _ms(pct(ttft, 99))},
        "sim_ttft_ms": {"p50": _ms(pct(sim, 50)), "p90": _ms(pct(sim, 90)), "p99": _ms(pct(sim, 99))},
        "p90_by_round_ms": [e["summary"]["ttft_ms"]["p90"] for e in runs],
        "sim_p90_by_round_ms": [e["summary"]["sim_ttft_ms"]["p90"] for e in runs],
        "groups_split_by_round": [e["summary"]["routing"]["groups_split"] for e in runs],
        "hit_rate": round(hits / queries, 4) if queries else None,
    }

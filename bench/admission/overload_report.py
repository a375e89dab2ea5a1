"""The pure half of overload.py: what a request's outcome is, the sims' command line, the
figures made from outcomes and samples (percentiles, per-band tables, the memory slope,
the gateway's queue-wait histogram), and the Markdown report. No processes, no network:
`overload.py --render` rebuilds a report from its .json with this alone.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MODEL = "bench-model"
BANDS = ("platinum", "gold", "silver", "bronze")
# The seed's bands: priority and saturation ceiling.
SEED_BANDS = {"platinum": (400, 1.00), "gold": (300, 0.85), "silver": (200, 0.60), "bronze": (100, 0.30)}


@dataclass
class Outcome:
    """One request as the client saw it; times in seconds."""

    band: str
    sent_at: float
    status: int  # 0: the client gave up or the connection failed
    ttft: float | None
    total: float
    retry_after: str | None = None
    code: str | None = None
    error: str | None = None
    # For a 200: which replica answered and the answer's id, to find it in the sim's own
    # record of the request (`/sim/requests`).
    replica: str | None = None
    answer_id: str | None = None


def sim_args(a: argparse.Namespace) -> list[str]:
    return [
        "--model",
        MODEL,
        "--max-seqs",
        str(a.max_seqs),
        "--decode-ms",
        str(a.decode_ms),
        "--decode-ms-per-seq",
        str(a.decode_ms_per_seq),
        "--prefill-ms-per-token",
        str(a.prefill_ms_per_token),
        "--default-max-tokens",
        str(a.max_tokens),
        # Runs recorded before --priority existed have no such setting.
        *(["--scheduling-policy", "priority"] if getattr(a, "priority", False) else []),
    ]


# --- figures ---------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile, q in 0..100."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, -(-int(q * len(ordered)) // 100) - 1) if q < 100 else len(ordered) - 1
    return ordered[min(rank, len(ordered) - 1)]


def slope_per_minute(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares growth per minute of (seconds, value) points."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return 0.0 if var == 0 else cov / var * 60


def by_band(outcomes: Sequence[Outcome], seconds: float) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for band in BANDS:
        mine = [o for o in outcomes if o.band == band]
        ok = [o for o in mine if o.status == 200]
        refused = [o for o in mine if o.status == 503]
        ttfts = [o.ttft for o in ok if o.ttft is not None]
        refusal_s = [o.total for o in refused]
        codes: dict[str, int] = {}
        for o in refused:
            codes[o.code or "?"] = codes.get(o.code or "?", 0) + 1
        table[band] = {
            "offered": len(mine),
            "offered_per_s": round(len(mine) / seconds, 2),
            "ok_200": len(ok),
            "refused_503": len(refused),
            "refused_503_with_retry_after": sum(1 for o in refused if o.retry_after),
            "refused_codes": codes,
            "other_status": sum(1 for o in mine if o.status not in (0, 200, 503)),
            "client_gave_up": sum(1 for o in mine if o.status == 0),
            "ttft_p50_ms": ms(percentile(ttfts, 50)),
            "ttft_p90_ms": ms(percentile(ttfts, 90)),
            "ttft_p99_ms": ms(percentile(ttfts, 99)),
            "ttft_max_ms": ms(max(ttfts) if ttfts else None),
            "refusal_p50_ms": ms(percentile(refusal_s, 50)),
            "refusal_p99_ms": ms(percentile(refusal_s, 99)),
        }
    return table


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def memory(samples: Sequence[dict[str, float]], warmup_s: float) -> dict[str, Any]:
    points = [(s["t"], s["rss_kib"] / 1024) for s in samples if "rss_kib" in s]
    settled = [p for p in points if p[0] >= warmup_s] or points
    depths = [s["queue_depth"] for s in samples if "queue_depth" in s]
    clients = [s["in_flight_clients"] for s in samples if "in_flight_clients" in s]
    return {
        "rss_start_mib": round(points[0][1], 1),
        "rss_min_mib": round(min(v for _, v in points), 1),
        "rss_max_mib": round(max(v for _, v in points), 1),
        "rss_end_mib": round(points[-1][1], 1),
        "rss_slope_after_warmup_mib_per_min": round(slope_per_minute(settled), 3),
        "warmup_s": warmup_s,
        "queue_depth_max": max(depths, default=0),
        "queue_depth_mean": round(sum(depths) / len(depths), 1) if depths else 0,
        "client_requests_open_max": max(clients, default=0),
    }


def _labels(key: str) -> tuple[str, dict[str, str]]:
    """A sample's name and labels, from `name{a="x",b="y"}`."""
    name, _, rest = key.partition("{")
    pairs = (part.split("=", 1) for part in rest.rstrip("}").split(",") if "=" in part)
    return name, {k: v.strip('"') for k, v in pairs}


def queue_waits(counters: dict[str, float]) -> dict[str, dict[str, float | None]]:
    """From the gateway's llmgw_admission_wait_seconds: how long admitted requests of each
    band waited in its queue (those admitted at once are not in it), over all models."""
    waits: dict[str, dict[str, float]] = {
        band: {"count": 0.0, "sum": 0.0, "0.01": 0.0, "0.1": 0.0, "1.0": 0.0} for band in BANDS
    }
    for key, value in counters.items():
        name, labels = _labels(key)
        row = waits.get(labels.get("band", ""))
        if row is None or not name.startswith("llmgw_admission_wait_seconds"):
            continue
        if name.endswith("_count"):
            row["count"] += value
        elif name.endswith("_sum"):
            row["sum"] += value
        elif name.endswith("_bucket") and labels.get("le") in row:
            row[labels["le"]] += value
    return {
        band: {
            "waited": row["count"],
            "mean_ms": None if not row["count"] else round(row["sum"] / row["count"] * 1000, 1),
            "within_0.01s": row["0.01"],
            "within_0.1s": row["0.1"],
            "within_1.0s": row["1.0"],
        }
        for band, row in waits.items()
    }


# --- the report ------------------------------------------------------------------------------------


def fmt(value: Any) -> str:
    return "–" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def band_table(phase: dict[str, Any]) -> list[str]:
    lines = [
        "| band | offered (/s) | 200 | 503 (with Retry-After) | 503 codes | client gave up | "
        "TTFT p50 / p99 ms | 503 answered in p50 / p99 ms |",
        "|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for band, row in phase["bands"].items():
        codes = ", ".join(f"{k} {v}" for k, v in sorted(row["refused_codes"].items())) or "–"
        lines.append(
            f"| {band} | {row['offered']} ({row['offered_per_s']}) | {row['ok_200']} | "
            f"{row['refused_503']} ({row['refused_503_with_retry_after']}) | {codes} | "
            f"{row['client_gave_up']} | "
            f"{fmt(row['ttft_p50_ms'])} / {fmt(row['ttft_p99_ms'])} | "
            f"{fmt(row['refusal_p50_ms'])} / {fmt(row['refusal_p99_ms'])} |"
        )
    return lines


def report(a: argparse.Namespace, result: dict[str, Any], meta: dict[str, Any]) -> str:
    on = result["on"]
    base_p99 = result["unloaded"]["ttft_p99_ms"]
    plat_p99 = on["bands"]["platinum"]["ttft_p99_ms"]
    ratio = None if not base_p99 or plat_p99 is None else round(plat_p99 / base_p99, 2)
    bronze = on["bands"]["bronze"]
    mem = on["memory"]
    lines = [
        f"# Admission under {a.factor:g}× overload ({meta['date']})",
        "",
        f"Command: `{meta['command']}`",
        "",
        f"Machine: {meta['machine']} — **2 vCPUs shared with other engineers' work**; load average "
        f"{meta['loadavg_start']:.1f} at the start and {meta['loadavg_end']:.1f} at the end. "
        + (
            f"The gateway pinned to core 0; the {a.replicas} sims and the load generator to core 1 (`--pin`)."
            if getattr(a, "pin", False)
            else f"The gateway, {a.replicas} sims and the load generator all ran on those 2 cores, unpinned."
        ),
        "",
        f"Set-up: {a.replicas} sim replicas (`{' '.join(sim_args(a))}`), `llmgw server` in front with "
        f"`router.scoring.target_inflight: {a.max_seqs}` (saturation 1.0 = every sequence slot busy), "
        f"`queue_ttl: {a.queue_ttl}s`, `queue_capacity_per_band: {a.per_band}`, "
        f"`queue_capacity_total: {a.total}`, band ceilings "
        f"{', '.join(f'{b} {a.ceilings[b]:g}' for b in BANDS)}. Streaming requests of ~100 prompt tokens and "
        f"{a.max_tokens} output tokens. Open-loop Poisson arrivals (seed {a.seed}), bands drawn "
        f"{', '.join(f'{b} {a.mix[b]:g}%' for b in BANDS)}; client timeout {a.client_timeout:g}s."
        + (
            " Priority scheduling (`--priority`): the sims run with `--scheduling-policy priority` and "
            "the endpoints have `priority_scheduling: true`, so each request's band is sent as the "
            "engine's `priority` (platinum first) and admission lets a band past work it can preempt."
            if getattr(a, "priority", False)
            else " Engines schedule first come, first served (no `--priority`)."
        ),
        "",
        "## Headline",
        "",
        "| figure | value | target |",
        "|---|---:|---|",
        f"| unloaded platinum TTFT p99 (one request at a time, {result['unloaded']['requests']} requests) | "
        f"{fmt(base_p99)} ms | |",
        f"| platinum TTFT p99 under overload | {fmt(plat_p99)} ms (×{fmt(ratio)}) | ≤ ×1.25 |",
        f"| capacity measured (closed loop, {a.replicas}×{a.max_seqs} streams) | "
        f"{result['capacity_req_per_s']} req/s | |",
        f"| offered | {result['offered_req_per_s']} req/s for {a.duration:g}s | {a.factor:g}× capacity |",
        f"| bronze: 503 with Retry-After / offered | {bronze['refused_503_with_retry_after']} / "
        f"{bronze['offered']}; client gave up: {bronze['client_gave_up']} | shed, not left to time out |",
        f"| gateway RSS min / max / end | {mem['rss_min_mib']} / {mem['rss_max_mib']} / "
        f"{mem['rss_end_mib']} MiB | flat |",
        f"| gateway RSS slope after {mem['warmup_s']:g}s | "
        f"{mem['rss_slope_after_warmup_mib_per_min']} MiB/min | ≈ 0 |",
        f"| admission queue depth max / mean (all bands) | {mem['queue_depth_max']:g} / "
        f"{mem['queue_depth_mean']:g} | ≤ {a.total} |",
        f"| gateway CPU over the phase | {fmt(on['gateway_cpu_s'])} s | |",
        "",
        "## Admission on, per band",
        "",
        *band_table(on),
        "",
    ]
    if "off" in result:
        off = result["off"]
        offm = off["memory"]
        lines += [
            f"## Admission off, same offered load, {a.off_duration:g}s (side by side)",
            "",
            *band_table(off),
            "",
            f"Gateway RSS {offm['rss_min_mib']} → {offm['rss_max_mib']} MiB "
            f"(slope {offm['rss_slope_after_warmup_mib_per_min']} MiB/min), "
            "client requests open at once up to "
            f"{offm['client_requests_open_max']:g} (admission on: {mem['client_requests_open_max']:g}).",
            "",
        ]
    lines += [
        "## Where the time to first token went, admission on",
        "",
        "Each answered request found in its sim's own record (`/sim/requests`, matched by replica",
        "and answer id): *engine* is from its arrival at the sim to the sim writing the first token",
        "(*slot wait*: the part spent waiting for one of the sim's sequence slots); *rest* is the",
        "client's TTFT minus the engine's: admission's queue, the gateway's own work, loopback and",
        "the client, all on the same two shared cores.",
        "",
        "| band | matched | engine p50 / p99 ms | engine slot wait p99 ms | rest p50 / p99 ms |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {band} | {t['matched']:g} | "
            f"{fmt(t['engine_ttft_p50_ms'])} / {fmt(t['engine_ttft_p99_ms'])} | "
            f"{fmt(t['engine_slot_wait_p99_ms'])} | {fmt(t['rest_p50_ms'])} / {fmt(t['rest_p99_ms'])} |"
            for band, t in on.get("ttft_split", {}).items()
        ),
        "",
        "## Time in the admission queue, admission on (the gateway's llmgw_admission_wait_seconds)",
        "",
        "Requests admitted on arrival (nothing queued, saturation under the band's ceiling) are not",
        "in it; under overload something is always queued, so every request goes through the queue.",
        "",
        "| band | admitted from the queue | mean wait ms | within 10 ms | within 100 ms | within 1 s |",
        "|---|---:|---:|---:|---:|---:|",
        *(
            f"| {band} | {w['waited']:g} | {fmt(w['mean_ms'])} | {w['within_0.01s']:g} | "
            f"{w['within_0.1s']:g} | {w['within_1.0s']:g} |"
            for band, w in queue_waits(on["gateway_counters"]).items()
        ),
        "",
        "## Gateway counters at the end (admission on)",
        "",
        "```",
        *(f"{k} {v:g}" for k, v in sorted(on["gateway_counters"].items()) if "_total{" in k),
        "```",
        "",
        "## RSS and queue depth, admission on (every 10th one-second sample)",
        "",
        "| t (s) | RSS (MiB) | queue depth | client requests open |",
        "|---:|---:|---:|---:|",
        *(
            f"| {s['t']:g} | {s['rss_kib'] / 1024:.1f} | {s['queue_depth']:g} | {s['in_flight_clients']:g} |"
            for s in on["rss_samples"][::10]
        ),
        "",
        "Every one-second sample is in the .json beside this file.",
    ]
    return "\n".join(lines) + "\n"

"""Turns the overhead benchmark's runs into medians, a Markdown report and a JSON file.

`python3 bench/router/report.py RESULT.json` writes RESULT.md again from the JSON.

A configuration is (target, mode, concurrency); it was run N times, and every figure
reported for it is the median over those runs, with the spread of req/s beside it so a
noisy machine shows as one. The JSON holds every run as measured, for anyone who wants
other statistics.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# Figures quoted in the issue from an earlier measurement on this machine class
# (c=64, medians of 3): req/s, by (target, mode).
QUOTED_RPS: Mapping[tuple[str, str], int] = {
    ("nginx-proxy", "nonstream"): 23_000,
    ("litellm", "nonstream"): 61,
    ("litellm", "stream"): 24,
    ("vllm-router-round-robin", "nonstream"): 15_500,
    ("vllm-router-round-robin", "stream"): 11_700,
    ("vllm-router-cache-aware", "nonstream"): 6_100,
    ("vllm-router-cache-aware", "stream"): 5_700,
}


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per configuration, in the order the configurations were first run."""
    groups: dict[tuple[str, str, int], list[Mapping[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["target"], run["mode"], run["concurrency"]), []).append(run)
    rows = []
    for (target, mode, concurrency), group in groups.items():
        rps = [r["rps"] for r in group]
        rows.append(
            {
                "target": target,
                "mode": mode,
                "concurrency": concurrency,
                "runs": len(group),
                "rps": _median(rps),
                "rps_min": min(rps),
                "rps_max": max(rps),
                "p50_ms": _median([r["p50_ms"] for r in group]),
                "p99_ms": _median([r["p99_ms"] for r in group]),
                "gateway_cpu_us_per_req": _median([r["gateway_cpu_us_per_req"] for r in group]),
                "upstream_cpu_us_per_req": _median([r["upstream_cpu_us_per_req"] for r in group]),
                "errors": sum(r["errors_total"] for r in group),
                "requests": sum(r["requests"] for r in group),
                "gateway_core_others_pct": _median([r["gateway_core_others_pct"] for r in group]),
                "load_core_busy_pct": _median([r["load_core_busy_pct"] for r in group]),
            }
        )
    baseline = {(r["mode"], r["concurrency"]): r["p50_ms"] for r in rows if r["target"] == "direct"}
    for row in rows:
        base = baseline.get((row["mode"], row["concurrency"]))
        row["added_p50_ms"] = (
            None
            if base is None or row["p50_ms"] is None or row["target"] == "direct"
            else row["p50_ms"] - base
        )
        cpu = row["gateway_cpu_us_per_req"]
        row["full_core_rps"] = 1e6 / cpu if cpu else None
        row["quoted_rps"] = QUOTED_RPS.get((row["target"], row["mode"])) if row["concurrency"] > 1 else None
    return rows


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _table(rows: Sequence[Mapping[str, Any]], concurrency_one: bool) -> list[str]:
    if concurrency_one:
        head = (
            "| target | mode | req/s | p50 ms | p99 ms | added p50 ms vs direct | gateway CPU µs/req "
            "| errors | others on gw core % |"
        )
    else:
        head = (
            "| target | mode | req/s (median) | req/s min–max | quoted req/s | p50 ms | p99 ms "
            "| gateway CPU µs/req | req/s per full core | errors | load core busy % | others on gw core % |"
        )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if concurrency_one:
            cells = [
                r["target"],
                r["mode"],
                _num(r["rps"]),
                _num(r["p50_ms"], 2),
                _num(r["p99_ms"], 2),
                _num(r["added_p50_ms"], 2),
                _num(r["gateway_cpu_us_per_req"]),
                f"{r['errors']}/{r['requests']}",
                _num(r["gateway_core_others_pct"]),
            ]
        else:
            cells = [
                r["target"],
                r["mode"],
                _num(r["rps"]),
                f"{_num(r['rps_min'])}–{_num(r['rps_max'])}",
                _num(r["quoted_rps"]),
                _num(r["p50_ms"], 1),
                _num(r["p99_ms"], 1),
                _num(r["gateway_cpu_us_per_req"]),
                _num(r["full_core_rps"]),
                f"{r['errors']}/{r['requests']}",
                _num(r["load_core_busy_pct"]),
                _num(r["gateway_core_others_pct"]),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    s = meta["settings"]
    out = [
        f"# Gateway overhead, {meta['date']}",
        "",
        "Produced by `bench/router/overhead.py` (see bench/router/README.md for what is measured "
        "and how to read it).",
        "",
        "```sh",
        meta["command"],
        "```",
        "",
        f"- Machine: {meta['machine']['cpu']}, {meta['machine']['cpus']} cores, "
        f"Linux {meta['machine']['kernel']}. **Shared with other engineers' work while this ran**: "
        "figures are noisy; the *others on gw core* column says how much of the gateway's core "
        "other processes took during each run.",
        f"- Gateway pinned to core {s['gateway_core']}; wrk (1 thread) and the nginx upstream "
        f"(1 worker) on core {s['load_core']}.",
        f"- Each configuration: a {s['warmup_s']} s warm-up, then {s['runs']} runs of {s['duration_s']} s, "
        "interleaved across targets (run 1 of each target, then run 2 of each, …), all targets up "
        "at once; every figure is the median of the runs.",
        f"- Versions: {', '.join(f'{k} {v}' for k, v in meta['versions'].items())}.",
        "",
        "## Throughput at concurrency 64",
        "",
    ]
    many = [r for r in rows if r["concurrency"] > 1]
    one = [r for r in rows if r["concurrency"] == 1]
    out += _table(many, concurrency_one=False) if many else ["(not run)"]
    out += ["", "## Latency at concurrency 1", ""]
    out += _table(one, concurrency_one=True) if one else ["(not run)"]
    out += ["", "## Targets", ""]
    for t in meta["targets"]:
        line = f"- **{t['name']}** (port {t['port']}): {t['note']}."
        if t.get("skipped"):
            why = t["skipped"].splitlines()[0]
            line += f" **Skipped**: {why} (its log: `{meta['run_dir']}/{t['name']}.log`; tail in the JSON)"
        if t.get("command"):
            line += f"\n  `{t['command']}`"
        out.append(line)
    if meta.get("notes"):
        out += ["", "## Notes", ""]
        out += [f"- {n}" for n in meta["notes"]]
    if meta.get("problems"):
        out += ["", "## Problems met", ""]
        out += [f"- {p}" for p in meta["problems"]]
    out += [
        "",
        "Columns: *gateway CPU µs/req* is the user+system CPU time of the gateway's process tree "
        "during the run divided by the requests wrk completed, and *req/s per full core* is 10⁶ "
        "divided by it: what the gateway would serve with its core to itself, the figure least "
        "disturbed by sharing; *load core busy %* near 100 means "
        "wrk and the upstream, not the gateway, set the ceiling; *added p50* is the target's "
        "median latency at c=1 minus direct's. Streaming latencies are to the last byte.",
        "",
    ]
    return "\n".join(out)


def rerender(json_path: Path) -> Path:
    """Writes the Markdown of a report again from its JSON (after this module changed)."""
    data = json.loads(json_path.read_text())
    meta = {k: v for k, v in data.items() if k not in ("summary", "runs")}
    md = json_path.with_suffix(".md")
    md.write_text(markdown(meta, summarize(data["runs"])))
    return md


def write(out_dir: Path, stem: str, meta: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> Path:
    """Writes STEM.md and STEM.json into `out_dir`, never over an earlier report."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / stem
    n = 1
    while path.with_suffix(".md").exists() or path.with_suffix(".json").exists():
        n += 1
        path = out_dir / f"{stem}-{n}"
    rows = summarize(runs)
    path.with_suffix(".md").write_text(markdown(meta, rows))
    path.with_suffix(".json").write_text(
        json.dumps({**meta, "summary": rows, "runs": list(runs)}, indent=2, ensure_ascii=False) + "\n"
    )
    return path.with_suffix(".md")


if __name__ == "__main__":
    import sys

    for arg in sys.argv[1:]:
        print(f"wrote {rerender(Path(arg))}")

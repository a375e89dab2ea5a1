"""The routing-quality report: Markdown for people, JSON for anyone who wants more.

`.venv/bin/python bench/routing/render.py RESULT.json` writes RESULT.md again from the JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PREFIX, ROUND_ROBIN, CACHE_AWARE = "llmgw-prefix", "llmgw-round-robin", "vllm-router-cache-aware"
RR_GOAL = 5.0


def _p90(meta: Mapping[str, Any], name: str, figure: str = "ttft_ms") -> float | None:
    """A target's p90 over all its rounds (the pooled figures)."""
    for p in meta.get("pooled", []):
        if p["name"] == name and p["rounds"]:
            value = p[figure]["p90"]
            return float(value) if value is not None else None
    return None


def goals(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The issue's two ratios, from the p90 TTFTs over all rounds."""
    llmgw, rr, ca = _p90(meta, PREFIX), _p90(meta, ROUND_ROBIN), _p90(meta, CACHE_AWARE)
    out: dict[str, Any] = {"llmgw_p90_ms": llmgw, "round_robin_p90_ms": rr, "cache_aware_p90_ms": ca}
    rounds = {p["name"]: p["p90_by_round_ms"] for p in meta.get("pooled", [])}
    if len(rounds.get(PREFIX, [])) > 1:
        mine = rounds[PREFIX]
        if len(rounds.get(ROUND_ROBIN, [])) == len(mine):
            out["round_robin_over_llmgw_by_round"] = [
                round(r / m, 2) for r, m in zip(rounds[ROUND_ROBIN], mine, strict=True)
            ]
        if len(rounds.get(CACHE_AWARE, [])) == len(mine):
            out["llmgw_over_cache_aware_by_round"] = [
                round(m / c, 3) for m, c in zip(mine, rounds[CACHE_AWARE], strict=True)
            ]
    if llmgw and rr:
        out["round_robin_over_llmgw"] = round(rr / llmgw, 2)
        out["round_robin_goal_met"] = rr / llmgw >= RR_GOAL
    if llmgw and ca:
        out["llmgw_over_cache_aware"] = round(llmgw / ca, 3)
        out["cache_aware_goal_met"] = llmgw <= ca
    return out


def _f(value: Any, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        text = f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"
    else:
        text = f"{value:,}" if isinstance(value, int) else str(value)
    return text + unit


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _goal_lines(meta: Mapping[str, Any]) -> list[str]:
    g = meta.get("goals", {})
    lines = ["| goal | figure | met |", "|---|---|---|"]
    if "round_robin_over_llmgw" in g:
        ratio = g["round_robin_over_llmgw"]
        figure = f"{_f(g['round_robin_p90_ms'])} / {_f(g['llmgw_p90_ms'])} ms = **{ratio:.1f}×**"
        lines.append(
            _row([f"round robin p90 / llmgw p90 ≥ {RR_GOAL:.0f}", figure, _yes(g["round_robin_goal_met"])])
        )
    if "llmgw_over_cache_aware" in g:
        ratio = g["llmgw_over_cache_aware"]
        met = _yes(g["cache_aware_goal_met"])
        if not g["cache_aware_goal_met"]:
            met += f" (missed by {100 * (ratio - 1):.1f} %)"
        figure = f"{_f(g['llmgw_p90_ms'])} / {_f(g['cache_aware_p90_ms'])} ms = **{ratio:.3f}**"
        lines.append(_row(["llmgw p90 ≤ vLLM router cache_aware p90", figure, met]))
    if len(lines) == 2:
        return ["Not enough targets ran to compute the ratios."]
    lines += ["", "p90s over every measured request of all rounds together."]
    if "round_robin_over_llmgw_by_round" in g:
        lines[-1] += " Round by round: round robin / llmgw " + ", ".join(
            f"{v:.1f}×" for v in g["round_robin_over_llmgw_by_round"]
        )
        if "llmgw_over_cache_aware_by_round" in g:
            lines[-1] += "; llmgw / cache_aware " + ", ".join(
                f"{v:.3f}" for v in g["llmgw_over_cache_aware_by_round"]
            )
        lines[-1] += "."
    llmgw, ca = _p90(meta, PREFIX, "sim_ttft_ms"), _p90(meta, CACHE_AWARE, "sim_ttft_ms")
    rr = _p90(meta, ROUND_ROBIN, "sim_ttft_ms")
    if llmgw and ca:
        alone = f"llmgw {_f(llmgw)} ms, cache_aware {_f(ca)} ms (ratio {llmgw / ca:.3f})"
        if rr:
            alone += f", round robin {_f(rr)} ms (round robin / llmgw {rr / llmgw:.1f}×)"
        lines += [
            "",
            f"Routing alone (p90 of the TTFT the sims simulated, without any gateway's own delay): {alone}.",
        ]
    return lines


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


POOLED_HEADER = [
    "target",
    "rounds",
    "TTFT p50 ms",
    "p90 ms",
    "p99 ms",
    "p90 by round ms",
    "errors",
    "prefix-cache hit rate",
    "groups split by round",
    "sim TTFT p90 ms",
]


def _pooled(meta: Mapping[str, Any]) -> list[str]:
    lines = [_row(POOLED_HEADER), _row(["---"] * len(POOLED_HEADER))]
    for p in meta.get("pooled", []):
        ttft = p["ttft_ms"]
        cells = [p["name"], str(p["rounds"]), _f(ttft["p50"]), f"**{_f(ttft['p90'])}**", _f(ttft["p99"])]
        cells += [", ".join(_f(v) for v in p["p90_by_round_ms"]), f"{p['errors']}/{p['measured']}"]
        cells += [_pct(p["hit_rate"]), ", ".join(str(v) for v in p["groups_split_by_round"])]
        cells.append(_f(p["sim_ttft_ms"]["p90"]))
        lines.append(_row(cells))
    return lines


RESULT_HEADER = [
    "target",
    "round",
    "TTFT p50 ms",
    "p90 ms",
    "p99 ms",
    "total p50 ms",
    "total p90 ms",
    "req/s",
    "errors",
    "prefix-cache hit rate",
    "evictions",
    "groups split",
    "sim TTFT p90 ms",
    "sim queue p90 ms",
    "not simulated p90 ms",
    "gw CPU ms/req",
    "others on gw core",
]


def _results(meta: Mapping[str, Any]) -> list[str]:
    lines = [_row(RESULT_HEADER), _row(["---"] * len(RESULT_HEADER))]
    for t in meta["targets"]:
        if "summary" not in t:
            why = t.get("skipped", "?").splitlines()[0]
            cells = [t["name"], str(t.get("round", "")), f"skipped: {why}"]
            lines.append(_row(cells + [""] * (len(RESULT_HEADER) - 3)))
            continue
        s, m = t["summary"], t.get("machine", {})
        ttft = s["ttft_ms"]
        lines.append(
            _row(
                [
                    t["name"],
                    str(t.get("round", "")),
                    _f(ttft["p50"]),
                    f"**{_f(ttft['p90'])}**",
                    _f(ttft["p99"]),
                    _f(s["total_ms"]["p50"]),
                    _f(s["total_ms"]["p90"]),
                    _f(s["throughput"]["requests_per_s"]),
                    f"{s['errors']}/{s['measured']}",
                    _pct(s["prefix_cache"]["hit_rate"]),
                    _f(s["prefix_cache"]["evictions"]),
                    f"{s['routing']['groups_split']}/{len(s['groups'])}",
                    _f(s["sim_ttft_ms"]["p90"]),
                    _f(s["sim_queue_ms"]["p90"]),
                    _f(s["unsimulated_ttft_ms"]["p90"]),
                    _f(m.get("gateway_cpu_ms_per_request")),
                    _f(m.get("gateway_core_others_pct"), " %"),
                ]
            )
        )
    return lines


PLACEMENT_HEADER = [
    "replica",
    "requests",
    "groups owned",
    "groups seen",
    "batch busy",
    "hit rate",
    "evictions",
]


def _placement(meta: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    for t in meta["targets"]:
        if "summary" not in t:
            continue
        s = t["summary"]
        routing = s["routing"]
        lines += [
            f"**{t['name']}, round {t.get('round', 1)}**: {routing['groups_on_one_replica']} of "
            f"{len(s['groups'])} groups on one replica only; on average "
            f"{_pct(routing['mean_main_share'])} of a group's requests on its main replica.",
            "",
            _row(PLACEMENT_HEADER),
            _row(["---"] * len(PLACEMENT_HEADER)),
        ]
        for r in s["replicas"]:
            owned = ", ".join(str(g) for g in r["groups_owned"]) or "–"
            cells = [f"sim-{r['replica'] + 1}", str(r["requests"]), f"{len(r['groups_owned'])}: {owned}"]
            cells += [str(r["groups_seen"]), _pct(r["batch_busy"]), _pct(r["hit_rate"]), _f(r["evictions"])]
            lines.append(_row(cells))
        split = [g for g in s["groups"] if g["main_share"] < 0.95]
        if split and len(split) <= len(s["groups"]) // 2:
            described = "; ".join(
                f"group {g['group']} ({g['requests']} requests, {_pct(g['main_share'])} on "
                f"sim-{g['main_replica'] + 1}, {g['replicas_used']} replicas)"
                for g in split
            )
            lines += ["", f"Split groups: {described}."]
        lines.append("")
    return lines


def _setup(meta: Mapping[str, Any]) -> list[str]:
    w, sims, machine = meta["workload"], meta["sims"], meta["machine"]
    shape = w["shape"]
    pinning = (
        "Gateway pinned to core 0; the sims and the client on core 1. *others on gw core* is the share of "
        "the gateway's core that other processes took while it was measured."
        if meta["pinned"]
        else "Nothing pinned."
    )
    fill = 100 * w["working_set_blocks"] / (sims["kv_blocks"] * sims["replicas"])
    flags = (
        f"--max-seqs {sims['max_seqs']} --block-size {sims['block_size']} --kv-blocks {sims['kv_blocks']} "
        f"--prefill-ms-per-token {sims['prefill_ms_per_token']:g} --decode-ms {sims['decode_ms']:g} "
        f"--decode-ms-per-seq {sims['decode_ms_per_seq']:g} --time-scale {sims['time_scale']:g}"
    )
    lines = [
        f"- Machine: {machine['cpus']} cores, **shared with other engineers' work while this ran** (load "
        f"average {machine['loadavg_start']} at the start, {machine['loadavg_end']} at the end). {pinning}",
        f"- Workload: {shape['groups']} groups × {shape['users_per_group']} users; system prompts of "
        f"{w['system_prompt_tokens'][0]:,} sim tokens; {shape['question_tokens']}-token questions and "
        f"{shape['answer_tokens']}-token answers kept in the history; conversations of "
        f"{shape['turns_per_conversation']} turns; {shape['max_tokens']} tokens generated per request; mean "
        f"prompt {w['mean_prompt_tokens']:,} tokens. Poisson arrivals at {w['rate_per_s']:g}/s, open loop; "
        f"warm-up {w['warmup_s']:g} s (excluded), then {w['measure_s']:g} s measured: "
        f"{w['measured_requests']:,} of {w['requests']:,} requests, the same sequence (seed {shape['seed']}) "
        "for every target, all streamed.",
        f"- Replicas: {sims['replicas']} fresh sims per target, `{flags}`. Working set of prefixes "
        f"{w['working_set_blocks']:,} blocks = {fill:.0f} % of the replicas' total KV capacity: it fits only "
        "if each group is kept on one replica.",
    ]
    tok = meta.get("tokenizer_check") or {}
    if tok:
        lines.append(
            f"- Sizes checked with the sim (`POST /tokenize`): system prompt {tok['system_prompt_tokens']:,} "
            f"tokens, group 0's first request {tok['first_request_tokens']:,} "
            f"(planned {tok['planned_first_request_tokens']:,})."
        )
    return lines


def markdown(meta: Mapping[str, Any]) -> str:
    lines = [
        f"# Routing quality on sim replicas, {meta['date']}",
        "",
        "Produced by `bench/routing/quality.py` (see bench/routing/README.md for the workload, its scaling "
        "from llm-d's published benchmark, and how to read this).",
        "",
        "```sh",
        meta["command"],
        "```",
        "",
        *_setup(meta),
        "",
        "## The issue's goals",
        "",
        *_goal_lines(meta),
        "",
        "## Results",
        "",
        "All rounds together (measured windows only):",
        "",
        *_pooled(meta),
        "",
        "Each round:",
        "",
        *_results(meta),
        "",
        "## Where the requests went",
        "",
        *_placement(meta),
        "## Targets",
        "",
    ]
    described: set[str] = set()
    for t in meta["targets"]:
        if t["name"] not in described and "command" in t:
            described.add(t["name"])
            lines += [f"- **{t['name']}**: {t.get('note', '')}.", f"  `{t['command']}`"]
    lines.append("")
    for t in meta["targets"]:
        extra = []
        if t.get("router_decisions"):
            extra.append(
                "routing decisions " + ", ".join(f"{k} {v:g}" for k, v in t["router_decisions"].items())
            )
        if t.get("gateway_counters"):
            extra.append(", ".join(f"{k} {v:g}" for k, v in t["gateway_counters"].items()))
        if "summary" in t and t["summary"]["error_kinds"]:
            extra.append(f"errors {t['summary']['error_kinds']}")
        if "machine" in t:
            m = t["machine"]
            extra.append(f"load average {m['loadavg_measure_start']} → {m['loadavg_end']}")
        if extra:
            lines.append(f"- {t['name']}, round {t.get('round', 1)}: " + "; ".join(extra) + ".")
    lines += ["", "## Notes", "", *[f"- {n}" for n in meta.get("notes", [])]]
    lines.append(
        "- Columns: *sim TTFT* is what the replica simulated (its queue plus the prefill of the uncached "
        "tokens), *sim queue* its wait for a batch slot and KV room; *not simulated* is the client's TTFT "
        "minus the sim's, per request: the gateway, the loopback, the client and the machine's other work. "
        "*groups split*: groups with under 95 % of their requests on one replica. *batch busy*: the share of "
        "the replica's batch slots (max-seqs × measured time) its measured requests held. Hit rates are the "
        "sims' own counters (cached prompt tokens / prompt tokens) over the measured window."
    )
    return "\n".join(lines) + "\n"


def write(out_dir: Path, stem: str, meta: dict[str, Any]) -> Path:
    """Writes STEM.md and STEM.json into `out_dir`, never over an earlier report."""
    meta["goals"] = goals(meta)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / stem
    n = 1
    while path.with_suffix(".md").exists() or path.with_suffix(".json").exists():
        n += 1
        path = out_dir / f"{stem}-{n}"
    path.with_suffix(".md").write_text(markdown(meta))
    path.with_suffix(".json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return path.with_suffix(".md")


if __name__ == "__main__":
    import sys

    for arg in sys.argv[1:]:
        source = Path(arg)
        data = json.loads(source.read_text())
        data["goals"] = goals(data)
        source.with_suffix(".md").write_text(markdown(data))
        print(f"wrote {source.with_suffix('.md')}")

"""Time to first token against prefix-cache warmth and working-set size.

Requests share long system prompts ("documents"); each round asks one question of each
of W documents, in the same order. With W documents' blocks fitting in `--kv-blocks`,
the first round prefills every document (cold) and later rounds find them cached, so
time to first token falls to the prefill of the question alone. Once W documents no
longer fit, the least recently used document is evicted just before it is asked again,
every round misses, and time to first token rises back to the cold figure.

For each W the cache is emptied first (`POST /reset_prefix_cache`). Reported per W and
round: the simulated TTFT the sim computed, the TTFT this client observed, and the
prefix-cache hit rate (cached prompt tokens over prompt tokens).

Usage:
    python bench/sim/prefix_cache.py --out bench/results/sim-prefix-cache.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from llmgw.testing.sim import start_sim_engine

_TOPIC_TEXT = "river mountain harbour forest desert glacier valley island canyon meadow"
TOPICS = _TOPIC_TEXT.split()


def document(index: int, words: int) -> str:
    """A long system prompt, distinct from its first token on."""
    body = " ".join(f"{TOPICS[(index + i) % len(TOPICS)]}{i % 97}" for i in range(words))
    return f"Document {index}. {body}"


async def ask(session: aiohttp.ClientSession, url: str, doc: str, question: str) -> tuple[str, float]:
    body = {
        "model": "sim-model",
        "messages": [{"role": "system", "content": doc}, {"role": "user", "content": question}],
        "max_tokens": 4,
        "stream": True,
    }
    started = time.perf_counter()
    ttft = math.nan
    response_id = ""
    async with session.post(url + "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.content:
            if math.isnan(ttft) and b'"content":"' in line and b'"content":""' not in line:
                ttft = time.perf_counter() - started
                response_id = json.loads(line[6:])["id"]
    return response_id, ttft


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sim_args = [
        "--kv-blocks", str(args.kv_blocks), "--block-size", str(args.block_size),
        "--max-model-len", str(args.max_model_len), "--max-seqs", "8", *args.sim_arg,
    ]  # fmt: skip
    docs = [document(i, args.document_words) for i in range(max(args.working_sets))]
    rows: list[dict[str, Any]] = []
    with start_sim_engine(*sim_args) as sim:
        async with aiohttp.ClientSession() as session:
            async with session.post(sim.url + "/tokenize", json={"prompt": docs[0]}) as response:
                doc_tokens = (await response.json())["count"]
            for width in args.working_sets:
                async with session.post(sim.url + "/reset_prefix_cache") as response:
                    response.raise_for_status()
                for round_no in range(1, args.rounds + 1):
                    for d in range(width):
                        question = f"Question {round_no} about document {d}?"
                        response_id, client_ttft = await ask(session, sim.url, docs[d], question)
                        async with session.get(sim.url + "/sim/requests?limit=1") as response:
                            record = (await response.json())["requests"][0]
                        if record["id"] != response_id:
                            raise RuntimeError("the sim's last request is not the one just sent")
                        rows.append(
                            {
                                "working_set": width,
                                "round": round_no,
                                "document": d,
                                "prompt_tokens": record["prompt_tokens"],
                                "cached_tokens": record["cached_tokens"],
                                "simulated_ttft_ms": round(record["ttft_s"] * 1000, 2),
                                "client_ttft_ms": round(client_ttft * 1000, 2),
                            }
                        )
            async with session.get(sim.url + "/sim/state") as response:
                final_state = await response.json()
    return {
        "benchmark": "sim prefix cache",
        "command": " ".join(["python", *sys.argv]),
        "sim_args": sim_args,
        "document_tokens": doc_tokens,
        "blocks_per_document": doc_tokens // args.block_size,
        "documents_that_fit": args.kv_blocks // max(1, doc_tokens // args.block_size),
        "evictions_total": final_state["prefix_cache"]["evictions"],
        "requests": rows,
    }


def summary(result: dict[str, Any], rounds: int) -> str:
    by_cell: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for row in result["requests"]:
        by_cell.setdefault((row["working_set"], row["round"]), []).append(row)
    widths = sorted({w for w, _ in by_cell})
    header = "| documents (W) | " + " | ".join(f"round {r}" for r in range(1, rounds + 1)) + " |"
    lines = [
        f"Each document ≈ {result['document_tokens']} tokens = {result['blocks_per_document']} blocks; "
        f"the cache holds about {result['documents_that_fit']} documents ({' '.join(result['sim_args'])}).",
        "",
        "Mean simulated TTFT in ms (client-observed TTFT in ms) [prefix-cache hit rate]:",
        "",
        header,
        "|" + "---|" * (rounds + 1),
    ]
    for w in widths:
        cells = []
        for r in range(1, rounds + 1):
            cell = by_cell[(w, r)]
            sim_ttft = statistics.fmean(x["simulated_ttft_ms"] for x in cell)
            client = statistics.fmean(x["client_ttft_ms"] for x in cell)
            hits = sum(x["cached_tokens"] for x in cell) / sum(x["prompt_tokens"] for x in cell)
            cells.append(f"{sim_ttft:.1f} ({client:.1f}) [{hits:.0%}]")
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--working-sets", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 3, 4, 5, 6, 8]
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--document-words", type=int, default=500, help="about two tokens per word")
    parser.add_argument("--kv-blocks", type=int, default=256)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument(
        "--sim-arg", action="append", default=[], help="extra sim-engine argument (repeatable)"
    )
    parser.add_argument("--out", type=Path, help="write the JSON here, and the table beside it as .md")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    table = summary(result, args.rounds)
    print(table)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(f"Command: `{result['command']}`\n\n" + table)


if __name__ == "__main__":
    main()

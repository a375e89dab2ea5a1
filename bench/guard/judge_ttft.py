"""What a `model` check adds to time to first token: streamed requests at concurrency 1
through a gateway whose default policy asks a judge (a sim in judge mode) on input,
and through one without, against the same echoing sim; the judge's own latency read
from `llmgw_guard_judge_seconds`. The issue's figure: the added TTFT equals the judge's
latency within 1 ms.

Usage: .venv/bin/python bench/guard/judge_ttft.py [-n 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families

from llmgw.testing.server import GatewayProcess, start_gateway
from llmgw.testing.sim import start_sim_engine

FAST = ("--decode-ms", "1", "--prefill-ms-per-token", "0.01")


def ttfts(gateway: GatewayProcess, n: int) -> list[float]:
    out = []
    with openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0) as client:
        for i in range(n + 20):
            started = time.perf_counter()
            stream = client.chat.completions.create(
                model="chat-model", messages=[{"role": "user", "content": f"hello {i}"}], stream=True
            )
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    if i >= 20:  # warm-up left out
                        out.append(time.perf_counter() - started)
                    break
            stream.close()
    return out


def judge_mean_s(gateway: GatewayProcess) -> tuple[float, int]:
    text = httpx.get(gateway.admin_url + "/metrics", timeout=5).text
    total = count = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "llmgw_guard_judge_seconds_sum":
                total += sample.value
            elif sample.name == "llmgw_guard_judge_seconds_count":
                count += sample.value
    return (total / count if count else 0.0), int(count)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=200)
    n = parser.parse_args().n
    echo = start_sim_engine(*FAST, "--model", "chat-model", "--echo")
    judge = start_sim_engine(*FAST, "--model", "judge", "--judge", "llamaguard3")
    base = {
        "endpoints": [
            {"id": "echo", "url": echo.url, "models": ["chat-model"], "engine": "sim"},
            {"id": "judge", "url": judge.url, "models": ["judge"], "engine": "sim"},
        ],
        "models": [
            {"name": "chat-model"},
            {"name": "judge", "role": "guard", "guard": {"format": "llamaguard3"}, "scaling": {"min": 1}},
        ],
    }
    guarded = {
        **base,
        "guard": {
            "default": "judged",
            "policies": [
                {"name": "judged", "checks": [{"type": "model", "model": "judge", "action": "block"}]}
            ],
        },
    }
    plain_gw = start_gateway(base, timeout=60)
    judged_gw = start_gateway(guarded, timeout=60)
    try:
        rounds = []
        for _ in range(3):  # interleaved, so drift hits both alike
            rounds.append((statistics.median(ttfts(plain_gw, n)), statistics.median(ttfts(judged_gw, n))))
        plain = statistics.median(r[0] for r in rounds)
        judged = statistics.median(r[1] for r in rounds)
        judge_s, asked = judge_mean_s(judged_gw)
        print(f"TTFT median, no guard:      {plain * 1e3:.2f} ms")
        print(f"TTFT median, judge checked: {judged * 1e3:.2f} ms")
        print(f"added:                      {(judged - plain) * 1e3:.2f} ms")
        print(f"judge's own (mean of {asked}): {judge_s * 1e3:.2f} ms")
        print(f"added minus judge:          {(judged - plain - judge_s) * 1e3:.2f} ms")
    finally:
        for handle in (plain_gw, judged_gw):
            handle.stop()
        echo.stop()
        judge.stop()


if __name__ == "__main__":
    main()

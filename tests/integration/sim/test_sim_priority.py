"""vLLM's priority scheduling over real sockets: fcfs refuses a priority, the priority
policy lets a better request preempt a running one, which still finishes whole."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import httpx
from sim_http_helpers import get_json

from llmgw.testing.sim import start_sim_engine

# One seat; 1 ms per prefill token, a flat 20 ms step.
ARGS = (
    "--max-seqs", "1", "--prefill-ms-per-token", "1", "--decode-ms", "20", "--decode-ms-per-seq", "0",
)  # fmt: skip


def chat(text: str, max_tokens: int, priority: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "sim-model",
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "stream": True,
    }
    if priority is not None:
        body["priority"] = priority
    return body


def test_fcfs_refuses_a_nonzero_priority_as_vllm_does() -> None:
    with start_sim_engine(*ARGS) as sim:
        refused = httpx.post(sim.url + "/v1/chat/completions", json=chat("hi", 2, priority=5), timeout=5)
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["message"] == "Got priority 5 but Priority scheduling is not enabled."
        assert error["param"] == "priority"
        assert error["type"] == "BadRequestError"
        # Priority 0 is vLLM's default, accepted by fcfs.
        ok = httpx.post(sim.url + "/v1/chat/completions", json=chat("hi", 2, priority=0), timeout=5)
        assert ok.status_code == 200


async def _stream(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[float, int]:
    """Seconds to the first content chunk, and how many content chunks came."""
    started = time.perf_counter()
    ttft = -1.0
    chunks = 0
    async with session.post(url + "/v1/chat/completions", json=body) as response:
        assert response.status == 200
        async for line in response.content:
            if b'"content":"' in line and b'"content":""' not in line:
                chunks += 1
                if ttft < 0:
                    ttft = time.perf_counter() - started
    return ttft, chunks


def test_a_better_request_preempts_the_running_one_which_still_finishes() -> None:
    with start_sim_engine(*ARGS, "--scheduling-policy", "priority") as sim:

        async def main() -> tuple[tuple[float, int], tuple[float, int]]:
            async with aiohttp.ClientSession() as session:
                # 40 tokens x 20 ms: the seat is held for most of a second.
                low = asyncio.create_task(_stream(session, sim.url, chat("background", 40, priority=300)))
                for _ in range(200):
                    async with session.get(sim.admin_url + "/sim/state") as response:
                        if (await response.json())["running"] == 1:
                            break
                    await asyncio.sleep(0.005)
                urgent = await _stream(session, sim.url, chat("urgent", 3, priority=0))
                return await low, urgent

        (_, low_chunks), (urgent_ttft, _) = asyncio.run(main())
        # Without preemption it would wait out the whole 800 ms answer.
        assert urgent_ttft < 0.3
        state = get_json(sim.admin_url + "/sim/state")
        assert state["preemptions"] == 1
        assert state["finished"]["length"] == 2
        assert low_chunks >= 30  # every token came (a few deltas may be empty text)
        recent = get_json(sim.admin_url + "/sim/requests")["requests"]
        low = next(r for r in recent if r["priority"] == 300)
        assert (low["completion_tokens"], low["preemptions"]) == (40, 1)

"""The load driver: sends a schedule's requests open loop and records what each saw.

Every request is sent at its scheduled time whether or not earlier ones have finished
(open loop), streaming, through one aiohttp session. Per request it records the time to
the first content chunk (TTFT, from the moment the request is sent), the time to the
end of the stream, the HTTP status, the response id (whose first eight hex digits are
the answering sim's seed, so the replica is known even through a gateway), and how late
the client itself was in sending it. A request counts as ok only with status 200 and a
stream that ends with `data: [DONE]` (the time of which is its total time); the body is
read to its end, as an SDK reads it.

Bounded: the schedule is finite, each request has a total timeout, and whatever is still
running `drain_s` after the last send is cancelled and recorded as an error.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass

import aiohttp
from workload import Request

_CONTENT = b'"content":"'
_EMPTY_CONTENT = b'"content":""'


@dataclass
class Outcome:
    """One request as the client saw it."""

    index: int
    phase: str
    group: int
    user: int
    turn: int
    prompt_tokens: int
    sent_s: float = 0.0
    """When it was sent, in seconds from the start of the run."""
    lag_s: float = 0.0
    """How late the client sent it against its schedule."""
    status: int = 0
    ttft_s: float | None = None
    total_s: float | None = None
    response_id: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200 and not self.error and self.ttft_s is not None

    def row(self) -> dict[str, object]:
        return asdict(self)


async def _send(
    session: aiohttp.ClientSession, url: str, request: Request, outcome: Outcome, timeout_s: float
) -> None:
    started = time.perf_counter()
    done = False
    try:
        async with session.post(
            url,
            data=request.body,
            headers={"Content-Type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=timeout_s),
        ) as response:
            outcome.status = response.status
            if response.status != 200:
                outcome.error = f"status {response.status}: {(await response.read())[:200]!r}"
                return
            async for line in response.content:
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    # Read on to the end of the body, as an SDK does, so the connection is
                    # reused rather than closed under the gateway mid-response.
                    done = True
                    outcome.total_s = time.perf_counter() - started
                    continue
                if not outcome.response_id or b'"error"' in payload[:12]:
                    event = json.loads(payload)
                    if "error" in event:
                        outcome.error = f"error event: {str(event['error'])[:200]}"
                        return
                    outcome.response_id = str(event.get("id", ""))
                if outcome.ttft_s is None and _CONTENT in payload and _EMPTY_CONTENT not in payload:
                    outcome.ttft_s = time.perf_counter() - started
            if not done:
                outcome.error = "stream ended without data: [DONE]"
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        outcome.error = f"{type(exc).__name__}: {exc}"[:300]


async def drive(
    base_url: str,
    requests: Sequence[Request],
    *,
    at_measure_start: Callable[[], Awaitable[None]],
    measure_start_s: float,
    timeout_s: float = 120.0,
    drain_s: float = 60.0,
) -> list[Outcome]:
    """Sends `requests` at their times; calls `at_measure_start` once the warm-up is over."""
    url = base_url.rstrip("/") + "/v1/chat/completions"
    outcomes = [
        Outcome(
            index=r.index,
            phase=r.phase,
            group=r.group,
            user=r.user,
            turn=r.turn,
            prompt_tokens=r.prompt_tokens,
        )
        for r in requests
    ]
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()
    async with aiohttp.ClientSession(connector=connector) as session:
        start = loop.time()
        marked = False
        for request, outcome in zip(requests, outcomes, strict=True):
            if not marked and request.at_s >= measure_start_s:
                marked = True
                tasks.add(loop.create_task(at_measure_start()))
            delay = start + request.at_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            outcome.sent_s = loop.time() - start
            outcome.lag_s = max(0.0, outcome.sent_s - request.at_s)
            tasks.add(loop.create_task(_send(session, url, request, outcome, timeout_s)))
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=drain_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5.0)
    for outcome in outcomes:
        if outcome.status == 0 and not outcome.error:
            outcome.error = f"unfinished {drain_s:.0f}s after the last request was sent"
        elif outcome.status == 200 and outcome.total_s is None and not outcome.error:
            outcome.error = f"stream unfinished {drain_s:.0f}s after the last request was sent"
    return outcomes

"""Asking a replica over HTTP how it is: ready (its health endpoint answers 200) and
idle (its metrics show no request running or queued, which is when a drain is over).

Both are polls bounded by a deadline: a replica is ready when its health answers 200
within `startup_timeout`, else it failed; a drain ends when the engine is idle or when
the drain time the control plane gave is up, whichever comes first. The clock and the
pause between polls are passed in, so tests decide time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

from llmgw.engines.metrics import MetricNames

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]

FIRST_POLL_S = 0.05
"""The first pause between polls; each next one is half as long again, up to MAX_POLL_S.
A sim is up in a fraction of a second and a large model in minutes: both are seen
promptly without hammering either."""
MAX_POLL_S = 0.25
"""A request for an on-demand model waits for this poll to see its engine ready, so the
cap is what readiness adds to a cold start at most; four probes a second of a health
endpoint cost an engine nothing."""
REQUEST_TIMEOUT_S = 2.0
"""One probe's bound: an engine busy loading may accept the connection and answer late."""


@dataclass(frozen=True)
class ReadyOutcome:
    """How waiting for a replica ended."""

    ready: bool
    detail: str
    """Why not, in a sentence, when not ready."""
    last_status: int | None = None


async def http_status(session: aiohttp.ClientSession, url: str) -> int | None:
    """The status of GET `url`, or None when nothing answers in REQUEST_TIMEOUT_S."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)) as response:
            await response.read()
            return response.status
    except (aiohttp.ClientError, TimeoutError):
        return None


async def wait_ready(
    session: aiohttp.ClientSession,
    health_url: str,
    timeout_s: float,
    alive: Callable[[], bool],
    *,
    clock: Clock = time.monotonic,
    sleep: Sleep = asyncio.sleep,
) -> ReadyOutcome:
    """Polls `health_url` until it answers 200, the process ends (`alive` turns false)
    or `timeout_s` passes."""
    deadline = clock() + timeout_s
    pause = FIRST_POLL_S
    status: int | None = None
    while True:
        if not alive():
            return ReadyOutcome(False, "the engine exited while loading", status)
        status = await http_status(session, health_url)
        if status == 200:
            return ReadyOutcome(True, "", status)
        left = deadline - clock()
        if left <= 0:
            said = f"last answer {status}" if status is not None else "it never answered"
            return ReadyOutcome(
                False,
                f"{health_url} did not answer 200 within startup_timeout {timeout_s:g}s ({said})",
                status,
            )
        await sleep(min(pause, left))
        pause = min(pause * 1.5, MAX_POLL_S)


async def busy_requests(session: aiohttp.ClientSession, metrics_url: str, names: MetricNames) -> float | None:
    """Requests running plus queued on the replica, from its metrics; None when the
    metrics cannot be read or name neither."""
    # The router's reader of metrics pages, imported when a drain needs it: importing
    # the router package at the agent's start would load the whole gateway.
    from llmgw.engines.load import read_load  # noqa: PLC0415

    try:
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
        async with session.get(metrics_url, timeout=timeout) as response:
            if response.status != 200:
                return None
            load = read_load(await response.read(), names)
    except (aiohttp.ClientError, TimeoutError):
        return None
    if load.running is None and load.waiting is None:
        return None
    return (load.running or 0.0) + (load.waiting or 0.0)


async def wait_idle(
    session: aiohttp.ClientSession,
    metrics_url: str,
    names: MetricNames,
    timeout_s: float,
    *,
    clock: Clock = time.monotonic,
    sleep: Sleep = asyncio.sleep,
) -> bool:
    """Polls the replica's metrics until nothing runs or waits there; whether it got
    there within `timeout_s`. Metrics that cannot be read end the wait at once: there
    is nothing to wait on, and the stop's own grace still covers a request finishing."""
    deadline = clock() + timeout_s
    pause = FIRST_POLL_S
    while True:
        busy = await busy_requests(session, metrics_url, names)
        if busy is None:
            return False
        if busy <= 0:
            return True
        left = deadline - clock()
        if left <= 0:
            return False
        await sleep(min(pause, left))
        pause = min(pause * 1.5, MAX_POLL_S)

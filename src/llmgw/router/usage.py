"""Usage read off the request path.

The request path hands over the raw bytes that carry usage (a whole non-streaming
answer, or a stream's usage event) and moves on; a background task decodes them in
batches and feeds the token counters (and, with auth, the usage store). The hand-over
queue is bounded: when it is full a record is dropped and counted, because a stalled
accountant must never become a stalled request.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

import orjson

from llmgw.router.metrics import GatewayMetrics

if TYPE_CHECKING:
    from llmgw.auth.budgets import Reservation
    from llmgw.auth.principal import Principal

log = logging.getLogger(__name__)


NO_TAGS: Mapping[str, str] = MappingProxyType({})
"""The tags of a request without any: one read-only mapping shared by them all."""


class Account(NamedTuple):
    """Who a request is charged to, with auth on: the caller, the prompt tokens its
    limits were charged at admission (replaced by the real count once known), its tags,
    how long it queued and what its budgets hold for it. A tuple, made with
    `new_account`: one per request."""

    principal: Principal
    counted_tokens: int
    tags: Mapping[str, str]
    """The request's tags, read-only from here on (`NO_TAGS` without any)."""
    queued_s: float
    reservation: Reservation | None
    """The most it may cost, held against its budgets until it ends (None without budgets)."""


new_account = functools.partial(tuple.__new__, Account)
"""An `Account` from a tuple of its fields, without the Python-level constructor a named
tuple's class call goes through."""


@dataclass(slots=True)
class UsageRecord:
    """One answered request, as the request path saw it."""

    request_id: str
    model: str
    endpoint: str
    status: int
    stream: bool
    usage_bytes: bytes | None
    started: float
    first_byte: float | None
    finished: float
    account: Account | None = None
    route: bytes = b""
    """The API path it came on, like /v1/chat/completions."""
    band: str = ""
    """The admission band it was admitted in."""
    trace_id: str = ""
    """Its OpenTelemetry trace id, when it was traced."""


@dataclass(frozen=True, slots=True)
class Tokens:
    prompt: int
    completion: int


def read_tokens(data: bytes | None) -> Tokens | None:
    """The usage in an answer or a usage event, if it carries one."""
    if not data:
        return None
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    usage = decoded.get("usage") if isinstance(decoded, dict) else None
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return Tokens(prompt, completion)


Finished = tuple[UsageRecord, Tokens | None]
"""A drained record and the tokens read from it."""
BatchConsumer = Callable[[Sequence[Finished]], None]


class UsageSink:
    """A bounded queue of records and the task that drains it. Consumers get each
    drain's records as one batch, so what they keep per caller or per model can be
    summed once per batch rather than updated once per request."""

    def __init__(self, metrics: GatewayMetrics, capacity: int = 65536) -> None:
        self._metrics = metrics
        self._queue: deque[UsageRecord] = deque()
        self._capacity = capacity
        self._wake = asyncio.Event()
        self.consumers: list[BatchConsumer] = []

    def record(self, record: UsageRecord) -> None:
        """Hands a record over; never blocks."""
        if len(self._queue) >= self._capacity:
            self._metrics.usage_dropped += 1
            return
        self._queue.append(record)
        if not self._wake.is_set():
            self._wake.set()

    def drain(self) -> int:
        """Accounts for everything queued now; returns how many records."""
        if not self._queue:
            return 0
        batch: list[Finished] = []
        queue = self._queue
        counted_tokens = self._metrics.counted_tokens
        while queue:
            record = queue.popleft()
            tokens = read_tokens(record.usage_bytes)
            if tokens is not None:
                counted_tokens(record.model, tokens.prompt, tokens.completion)
            batch.append((record, tokens))
        for consumer in self.consumers:
            try:
                consumer(batch)
            except Exception:  # a consumer's bug must not stop accounting for the rest
                log.exception("usage consumer failed")
        return len(batch)

    async def run(self, interval: float = 0.05) -> None:
        """Drains the queue whenever records arrive, at most every `interval` seconds."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            self.drain()
            await asyncio.sleep(interval)

"""The response cache: whole answers kept in memory, per gateway process, lost on restart.

A pure type with the clock injected. Entries live for the lifetime their project chose
(`llmgw keys cache`) and share one memory budget (`router.cache.max_bytes`): the least
recently used go first when a new one needs room. An answer larger than
`router.cache.max_entry_bytes` is not kept at all. Sizes count the answer's bytes and
its key, plus a fixed allowance for the entry itself, so a flood of tiny answers cannot
outgrow the budget by their bookkeeping.

The gateway decides what may be cached and what the key is (llmgw.router.cache_key);
this type only keeps bytes.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

ENTRY_OVERHEAD_BYTES = 256
"""What an entry costs beyond its bytes: the record, the dictionary slot, the tuple."""


@dataclass(frozen=True, slots=True)
class Entry:
    """A kept answer: the bytes the client was sent (one body, or a stream's chunks in
    order), how it was labelled, and which model answered it."""

    content_type: str
    chunks: tuple[bytes, ...]
    model: str
    expires: float
    size: int


@dataclass(slots=True)
class CacheStats:
    """Counters for the metrics (llmgw_response_cache_*)."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    stored: int = 0
    too_large: int = 0


@dataclass(slots=True)
class ResponseCache:
    """Answers by key, bounded in bytes, least recently used evicted first."""

    max_bytes: int
    max_entry_bytes: int
    clock: Callable[[], float] = time.monotonic
    stats: CacheStats = field(default_factory=CacheStats)
    size_bytes: int = 0
    _entries: OrderedDict[bytes, Entry] = field(default_factory=OrderedDict)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> Entry | None:
        """The entry under `key` if it has not expired (it becomes the most recently
        used); counts a hit or a miss."""
        entry = self._entries.get(key)
        if entry is None:
            self.stats.misses += 1
            return None
        if entry.expires <= self.clock():
            self._drop(key, entry)
            self.stats.misses += 1
            return None
        self._entries.move_to_end(key)
        self.stats.hits += 1
        return entry

    def put(self, key: bytes, content_type: str, chunks: tuple[bytes, ...], model: str, ttl_s: float) -> bool:
        """Keeps an answer for `ttl_s` seconds; False when it is larger than an entry may
        be (or `ttl_s` is not positive). Older entries are evicted until it fits."""
        size = sum(len(c) for c in chunks) + len(key) + ENTRY_OVERHEAD_BYTES
        if ttl_s <= 0 or size > self.max_entry_bytes:
            self.stats.too_large += ttl_s > 0
            return False
        old = self._entries.pop(key, None)
        if old is not None:
            self.size_bytes -= old.size
        while self._entries and self.size_bytes + size > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.size_bytes -= evicted.size
            self.stats.evictions += 1
        self._entries[key] = Entry(content_type, chunks, model, self.clock() + ttl_s, size)
        self.size_bytes += size
        self.stats.stored += 1
        return True

    def _drop(self, key: bytes, entry: Entry) -> None:
        del self._entries[key]
        self.size_bytes -= entry.size

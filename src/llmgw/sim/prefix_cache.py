"""The KV cache as a pool of blocks, with a prefix cache over full prompt blocks.

Modelled on vLLM's automatic prefix caching. A prompt is cut into blocks of
`block_size` tokens; each full block is named by a hash chained over every token
before it, so two prompts share a block exactly when they share everything up to its
end. Blocks come in three kinds:

- referenced: a full prompt block some running request uses (reference counted);
- evictable: a full prompt block no request uses, kept in least-recently-used order
  so a later prompt can reuse it; it is evicted only when its room is needed;
- private: the rest of a running request (its partial last prompt block and the blocks
  its answer will fill), never shared.

A request is admitted only if its blocks fit: the sim reserves prompt plus planned
answer at admission (real engines allocate as they decode and preempt when they run
out; reserving keeps the model free of preemption while still bounding concurrency by
memory). Usage, as vLLM reports it, is referenced plus private over capacity.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


def block_hashes(token_ids: Sequence[int], block_size: int) -> tuple[int, ...]:
    """Chained hashes of the full blocks of the prompt that may be served from cache.

    Like vLLM, the last prompt token is always computed (its logits give the first
    output token), so only blocks wholly inside the first `len - 1` tokens count.
    """
    usable = max(0, len(token_ids) - 1) // block_size
    out: list[int] = []
    parent = 0
    for b in range(usable):
        start = b * block_size
        parent = hash((parent, *token_ids[start : start + block_size]))
        out.append(parent)
    return tuple(out)


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks needed to hold `tokens` tokens."""
    return math.ceil(tokens / block_size)


@dataclass(frozen=True, slots=True)
class Allocation:
    """The blocks one admitted request holds until it finishes."""

    shared: tuple[int, ...]
    private: int
    hit_blocks: int


class BlockPool:
    """Fixed-capacity KV blocks with an LRU prefix cache; pure bookkeeping, no clock."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1 block")
        self.capacity = capacity
        self._refs: dict[int, int] = {}
        self._evictable: OrderedDict[int, None] = OrderedDict()
        self._private = 0
        self.evictions = 0

    def cached_prefix(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of `hashes` the cache holds."""
        n = 0
        for h in hashes:
            if h not in self._refs and h not in self._evictable:
                break
            n += 1
        return n

    def try_allocate(self, hashes: Sequence[int], total_blocks: int) -> Allocation | None:
        """Reserve `total_blocks` for a request whose cacheable prompt blocks are `hashes`.

        Returns None, changing nothing, when the blocks do not fit beside the requests
        already running.
        """
        hit = self.cached_prefix(hashes)
        fresh = hashes[hit:]
        private = total_blocks - len(hashes)
        if private < 0:
            raise ValueError("total_blocks must cover the prompt's cacheable blocks")
        revived = sum(1 for h in hashes[:hit] if h in self._evictable)
        allocatable = self.capacity - len(self._refs) - self._private - revived
        if len(fresh) + private > allocatable:
            return None
        for h in hashes[:hit]:
            if h in self._evictable:
                del self._evictable[h]
                self._refs[h] = 1
            else:
                self._refs[h] += 1
        for h in fresh:
            # A block can outlive an evicted ancestor; past the broken link it is
            # recomputed like any miss, so its stale copy gives its room back first.
            self._evictable.pop(h, None)
        overflow = (
            len(self._refs) + len(self._evictable) + self._private + len(fresh) + private - self.capacity
        )
        for _ in range(max(0, overflow)):
            self._evictable.popitem(last=False)
            self.evictions += 1
        for h in fresh:
            self._refs[h] = 1
        self._private += private
        return Allocation(shared=tuple(hashes), private=private, hit_blocks=hit)

    def release(self, allocation: Allocation) -> None:
        """Give back a finished request's blocks; its prompt blocks stay cached."""
        self._private -= allocation.private
        # Tail blocks are released first so they are evicted first, as vLLM does: the
        # head of a prompt is the part most likely to be shared.
        for h in reversed(allocation.shared):
            left = self._refs[h] - 1
            if left:
                self._refs[h] = left
            else:
                del self._refs[h]
                self._evictable[h] = None

    def reset(self) -> int:
        """Drop every cached block no request uses; returns how many were dropped."""
        dropped = len(self._evictable)
        self._evictable.clear()
        return dropped

    @property
    def used_blocks(self) -> int:
        """Blocks held by running requests."""
        return len(self._refs) + self._private

    @property
    def cached_blocks(self) -> int:
        """Full prompt blocks held in the cache, in use or not."""
        return len(self._refs) + len(self._evictable)

    @property
    def occupied_blocks(self) -> int:
        """Blocks holding anything: in use, or cached and evictable."""
        return len(self._refs) + len(self._evictable) + self._private

    @property
    def usage(self) -> float:
        """Fraction of the pool held by running requests (vLLM's kv_cache_usage_perc)."""
        return self.used_blocks / self.capacity

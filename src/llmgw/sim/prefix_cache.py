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

from llmgw.engines.vllm import KV_EVENTS_HASH_SEED
from llmgw.protocol.kv_hash import block_key, hash_blocks, none_hash

# The chain's root, derived as vLLM derives it from the PYTHONHASHSEED the agent gives
# a kv_events replica, so the blocks the sim names in its KV events are the ones a
# router computes from the same tokens.
_ROOT = none_hash(KV_EVENTS_HASH_SEED)


def block_hashes(token_ids: Sequence[int], block_size: int) -> tuple[int, ...]:
    """Chained hashes of the full blocks of the prompt that may be served from cache.

    Like vLLM, the last prompt token is always computed (its logits give the first
    output token), so only blocks wholly inside the first `len - 1` tokens count.
    """
    usable = max(0, len(token_ids) - 1) // block_size
    # vLLM's own block hashes (sha256 over CBOR, chained), as 64-bit keys.
    return tuple(block_key(h) for h in hash_blocks(token_ids, block_size, _ROOT, usable))


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
        # When not None, what entered and left the cache since the publisher last took
        # it: ("stored", keys) or ("removed", keys), in order (the sim's KV events).
        self.journal: list[tuple[str, tuple[int, ...]]] | None = None

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
        evicted = [self._evictable.popitem(last=False)[0] for _ in range(max(0, overflow))]
        self.evictions += len(evicted)
        for h in fresh:
            self._refs[h] = 1
        if self.journal is not None:
            if evicted:
                self.journal.append(("removed", tuple(evicted)))
            if fresh:
                self.journal.append(("stored", tuple(fresh)))
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
        if self.journal is not None and dropped:
            self.journal.append(("removed", tuple(self._evictable)))
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

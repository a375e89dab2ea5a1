"""The KV block pool: prefix hits, reference counts, LRU eviction, capacity."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from llmgw.sim.prefix_cache import Allocation, BlockPool, block_hashes, blocks_for


def test_only_full_blocks_before_the_last_token_are_cacheable() -> None:
    assert block_hashes(list(range(16)), 4) == block_hashes(list(range(16)), 4)
    assert len(block_hashes(list(range(16)), 4)) == 3  # the last token is always computed
    assert len(block_hashes(list(range(17)), 4)) == 4
    assert block_hashes([1], 4) == ()


def test_block_hashes_chain_so_a_block_depends_on_everything_before_it() -> None:
    a = block_hashes([1, 2, 3, 4, 5, 6, 7, 8, 9], 4)
    b = block_hashes([9, 2, 3, 4, 5, 6, 7, 8, 9], 4)
    assert a[0] != b[0]
    assert a[1] != b[1]  # same tokens in block 1, different history


def test_blocks_for_rounds_up() -> None:
    assert blocks_for(16, 16) == 1
    assert blocks_for(17, 16) == 2


def test_a_second_request_with_the_same_prefix_hits_its_blocks() -> None:
    pool = BlockPool(100)
    hashes = block_hashes(list(range(65)), 16)
    first = pool.try_allocate(hashes, 6)
    assert first is not None
    assert first.hit_blocks == 0
    second = pool.try_allocate(hashes, 6)
    assert second is not None
    assert second.hit_blocks == 4
    assert pool.used_blocks == 4 + 2 + 2  # shared prompt blocks once, private blocks each


def test_released_blocks_stay_cached_and_are_hit_later() -> None:
    pool = BlockPool(100)
    hashes = block_hashes(list(range(65)), 16)
    allocation = pool.try_allocate(hashes, 5)
    assert allocation is not None
    pool.release(allocation)
    assert pool.used_blocks == 0
    assert pool.cached_blocks == 4
    again = pool.try_allocate(hashes, 5)
    assert again is not None
    assert again.hit_blocks == 4


def test_a_request_that_does_not_fit_is_refused_and_changes_nothing() -> None:
    pool = BlockPool(10)
    held = pool.try_allocate((), 8)
    assert held is not None
    assert pool.try_allocate((), 3) is None
    assert pool.used_blocks == 8
    pool.release(held)
    assert pool.try_allocate((), 10) is not None


def test_eviction_is_least_recently_used_and_counted() -> None:
    pool = BlockPool(8)
    a = block_hashes(list(range(0, 65)), 16)
    b = block_hashes(list(range(100, 165)), 16)
    for hashes in (a, b):
        allocation = pool.try_allocate(hashes, 4)
        assert allocation is not None
        pool.release(allocation)
    assert pool.cached_blocks == 8
    # Reusing a makes b the least recently used; a new prompt then evicts b, not a.
    reused = pool.try_allocate(a, 4)
    assert reused is not None
    pool.release(reused)
    c = block_hashes(list(range(200, 265)), 16)
    fresh = pool.try_allocate(c, 4)
    assert fresh is not None
    assert pool.evictions == 4
    assert pool.cached_prefix(a) == 4
    assert pool.cached_prefix(b) == 0


def test_a_prompt_tail_is_evicted_before_its_head() -> None:
    pool = BlockPool(6)
    a = block_hashes(list(range(65)), 16)
    allocation = pool.try_allocate(a, 4)
    assert allocation is not None
    pool.release(allocation)
    taker = pool.try_allocate((), 3)
    assert taker is not None
    assert pool.cached_prefix(a) == 3  # one block went, and it was the last one


def test_reset_drops_only_unused_blocks() -> None:
    pool = BlockPool(20)
    held = pool.try_allocate(block_hashes(list(range(33)), 16), 3)
    idle = pool.try_allocate(block_hashes(list(range(50, 83)), 16), 3)
    assert held is not None
    assert idle is not None
    pool.release(idle)
    assert pool.reset() == 2
    assert pool.cached_blocks == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 6), st.booleans()), max_size=40))
def test_the_pool_never_holds_more_than_its_capacity(steps: list[tuple[int, int, bool]]) -> None:
    pool = BlockPool(12)
    held: list[Allocation] = []
    for prefix, extra, release_first in steps:
        if release_first and held:
            pool.release(held.pop(0))
        hashes = block_hashes([prefix] * (prefix * 16 + 1), 16)
        allocation = pool.try_allocate(hashes, len(hashes) + extra)
        if allocation is not None:
            held.append(allocation)
        assert pool.used_blocks <= pool.capacity
        assert pool.occupied_blocks <= pool.capacity
        assert 0.0 <= pool.usage <= 1.0
    for allocation in held:
        pool.release(allocation)
    assert pool.used_blocks == 0

"""The response cache type: lifetimes by the injected clock, eviction of the least
recently used by bytes, the entry size bound, and the counters behind its metrics."""

from __future__ import annotations

from llmgw.router.response_cache import ENTRY_OVERHEAD_BYTES, ResponseCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _key(n: int) -> bytes:
    return n.to_bytes(4, "big")


def _cache(max_bytes: int, max_entry_bytes: int, clock: Clock) -> ResponseCache:
    return ResponseCache(max_bytes, max_entry_bytes, clock)


def _size(body: bytes) -> int:
    return len(body) + 4 + ENTRY_OVERHEAD_BYTES


def test_an_entry_is_kept_until_its_lifetime_ends() -> None:
    clock = Clock()
    cache = _cache(1 << 20, 1 << 16, clock)
    assert cache.put(_key(1), "application/json", (b"answer",), "m", ttl_s=10)
    clock.now += 9.999
    entry = cache.get(_key(1))
    assert entry is not None
    assert (entry.chunks, entry.model, entry.content_type) == ((b"answer",), "m", "application/json")
    clock.now += 0.001
    assert cache.get(_key(1)) is None
    assert (len(cache), cache.size_bytes) == (0, 0)
    assert (cache.stats.hits, cache.stats.misses) == (1, 1)


def test_the_least_recently_used_entry_is_evicted_first() -> None:
    clock = Clock()
    body = b"x" * 100
    cache = _cache(3 * _size(body), _size(body), clock)
    for n in range(3):
        assert cache.put(_key(n), "t", (body,), "m", 60)
    assert cache.size_bytes == 3 * _size(body)
    # Reading 0 makes 1 the least recently used.
    assert cache.get(_key(0)) is not None
    assert cache.put(_key(3), "t", (body,), "m", 60)
    assert cache.get(_key(1)) is None
    assert all(cache.get(_key(n)) is not None for n in (0, 2, 3))
    assert cache.stats.evictions == 1
    assert cache.size_bytes == 3 * _size(body)


def test_a_large_entry_evicts_as_many_as_it_needs() -> None:
    clock = Clock()
    cache = _cache(1000, 1000, clock)
    for n in range(3):
        cache.put(_key(n), "t", (b"y" * 10,), "m", 60)
    big = b"z" * (1000 - 4 - ENTRY_OVERHEAD_BYTES)
    assert cache.put(_key(9), "t", (big,), "m", 60)
    assert (len(cache), cache.size_bytes, cache.stats.evictions) == (1, 1000, 3)


def test_an_answer_larger_than_an_entry_may_be_is_not_kept() -> None:
    clock = Clock()
    cache = _cache(10_000, 500, clock)
    cache.put(_key(1), "t", (b"a",), "m", 60)
    too_big = (b"b" * 200, b"c" * 200)  # a stream's chunks count together
    assert not cache.put(_key(2), "t", too_big, "m", 60)
    assert cache.get(_key(2)) is None
    assert cache.get(_key(1)) is not None  # nothing was evicted for it
    assert cache.stats.too_large == 1


def test_storing_again_replaces_the_entry_and_its_size() -> None:
    clock = Clock()
    cache = _cache(10_000, 1000, clock)
    cache.put(_key(1), "t", (b"a" * 50,), "m", 60)
    cache.put(_key(1), "t", (b"b" * 10,), "m2", 60)
    entry = cache.get(_key(1))
    assert entry is not None
    assert entry.chunks == (b"b" * 10,)
    assert entry.model == "m2"
    assert (len(cache), cache.size_bytes) == (1, _size(b"b" * 10))


def test_no_lifetime_keeps_nothing() -> None:
    cache = _cache(10_000, 1000, Clock())
    assert not cache.put(_key(1), "t", (b"a",), "m", 0)
    assert len(cache) == 0
    assert cache.stats.too_large == 0

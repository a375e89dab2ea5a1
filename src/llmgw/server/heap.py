"""CPython's cyclic garbage collector, set for a process that serves for a long time.

A gateway holds a large heap that lives as long as the process (modules, settings,
the catalog, pydantic and SQLAlchemy internals) and a large one that churns slowly (the
prefix tree, up to `router.prefix.max_nodes` nodes of three objects each). With the
interpreter's defaults, every few thousand requests a full collection walks all of it:
measured on the router benchmark, 14 full collections of about 110 ms each in 20
seconds, about a tenth of the gateway's CPU and every p99 latency in the hundreds of
milliseconds. Two settings bring that down to a few collections (bench/results/
router-overhead-2026-11-29-7.md):

- everything alive once the servers are up is moved out of the collector's sight
  (`gc.freeze`): it is never garbage, and walking it is the bulk of a full collection;
- the youngest generation is collected after 10,000 allocations rather than 700, so
  a request's objects are mostly gone before a collection looks at them, and fewer of
  them are promoted to where only a full collection reclaims them.
"""

from __future__ import annotations

import gc

YOUNG_COLLECTION_AFTER = 10_000
"""Allocations (less deallocations) between collections of the youngest generation."""


def settle() -> None:
    """Freezes what start-up made and raises the youngest generation's threshold. Call
    once, when everything that lives as long as the process exists."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_AFTER, middle, oldest)

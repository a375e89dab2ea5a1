"""Which replicas hold which KV blocks, learned only from the replicas' own events.

Each replica's blocks are kept in insertion order under a per-replica cap, so memory is
bounded however much the engines churn: past the cap the oldest entry is dropped, which
can only make the index under-report a replica's cache (a missed hit), never route to
a block that was never there. Sequence numbers are checked per replica: a gap (a
dropped message) or a step back (the engine restarted and counts from 0 again) means
the index no longer knows what that replica holds, so its entries are dropped and
rebuilt from the events that follow.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from llmgw.router.kv_events import Batch, Cleared, Removed, Stored


class KVIndex:
    """block key -> replicas holding it; pure bookkeeping, no I/O and no clock."""

    def __init__(self, max_blocks_per_replica: int = 1_000_000) -> None:
        if max_blocks_per_replica < 1:
            raise ValueError("max_blocks_per_replica must be at least 1")
        self._cap = max_blocks_per_replica
        self._holders: dict[int, set[str]] = {}
        self._blocks: dict[str, OrderedDict[int, None]] = {}
        self._seq: dict[str, int] = {}
        self.resyncs = 0

    def __len__(self) -> int:
        return len(self._holders)

    def blocks_of(self, replica: str) -> int:
        return len(self._blocks.get(replica, ()))

    def apply(self, replica: str, batch: Batch) -> bool:
        """Apply one batch; False when a gap or restart made the replica start over."""
        last = self._seq.get(replica)
        in_order = last is None or batch.seq == last + 1
        if not in_order:
            self.resyncs += 1
            self.drop(replica)
        self._seq[replica] = batch.seq
        for event in batch.events:
            if isinstance(event, Stored):
                if event.lora_id is None:  # adapters' blocks are never what a base prompt asks for
                    self._store(replica, event.keys)
            elif isinstance(event, Removed):
                self._remove(replica, event.keys)
            elif isinstance(event, Cleared):
                self._clear(replica)
        return in_order

    def drop(self, replica: str) -> None:
        """Forget a replica's blocks (withdrawn, resyncing, or its feed lost)."""
        self._clear(replica)
        self._seq.pop(replica, None)
        self._blocks.pop(replica, None)

    def _store(self, replica: str, keys: Sequence[int]) -> None:
        mine = self._blocks.setdefault(replica, OrderedDict())
        holders = self._holders
        for key in keys:
            if key in mine:
                mine.move_to_end(key)
                continue
            mine[key] = None
            holders.setdefault(key, set()).add(replica)
            if len(mine) > self._cap:
                old, _ = mine.popitem(last=False)
                self._unhold(old, replica)

    def _remove(self, replica: str, keys: Sequence[int]) -> None:
        mine = self._blocks.get(replica)
        if mine is None:
            return
        for key in keys:
            if mine.pop(key, 0) is None:
                self._unhold(key, replica)

    def _clear(self, replica: str) -> None:
        mine = self._blocks.get(replica)
        if mine is None:
            return
        for key in mine:
            self._unhold(key, replica)
        mine.clear()

    def _unhold(self, key: int, replica: str) -> None:
        held = self._holders.get(key)
        if held is not None:
            held.discard(replica)
            if not held:
                del self._holders[key]

    def leading(self, keys: Sequence[int]) -> dict[str, int]:
        """For each replica, how many of `keys` it holds from the first on, unbroken."""
        holders = self._holders
        out: dict[str, int] = {}
        if not keys:
            return out
        first = holders.get(keys[0])
        if not first:
            return out
        alive = set(first)
        depth = 1
        for key in keys[1:]:
            held = holders.get(key)
            if not held:
                break
            still = alive & held
            for gone in alive - still:
                out[gone] = depth
            if not still:
                alive = still
                break
            alive = still
            depth += 1
        for replica in alive:
            out[replica] = depth
        return out

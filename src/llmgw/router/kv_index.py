"""Which replicas hold which KV blocks, learned only from the replicas' own events.

Each replica's blocks are kept in insertion order under a per-replica cap, so memory is
bounded however much the engines churn: past the cap the oldest entry is dropped, which
can only make the index under-report a replica's cache (a missed hit), never route to
a block that was never there. Sequence numbers are checked per replica: a gap (a
dropped message) or a step back (the engine restarted and counts from 0 again) means
the index no longer knows what that replica holds, so its entries are dropped and
rebuilt from the events that follow.

Lookups do not walk the prompt block by block (4,096 dictionary probes cost
milliseconds in Python): a replica that holds a chained block held the blocks before
it when it stored it (vLLM stores a request's blocks in chain order and frees them
tail first), so "holds block i" is taken as monotone along the prompt and each
replica's depth is found by binary search, about 12 probes for 4,096 blocks. Where an
engine evicted a middle block the count can come out higher than the truth; the cost
is one request routed to a replica with a shorter hit than expected.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from llmgw.protocol.kv_events import Batch, Cleared, Removed, Stored


class KVIndex:
    """block key -> replicas holding it; pure bookkeeping, no I/O and no clock."""

    def __init__(self, max_blocks_per_replica: int = 1_000_000) -> None:
        if max_blocks_per_replica < 1:
            raise ValueError("max_blocks_per_replica must be at least 1")
        self._cap = max_blocks_per_replica
        # Holders as a bit mask over replica slots: one AND per probe, no set to build.
        self._holders: dict[int, int] = {}
        self._slot: dict[str, int] = {}
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
        self._slot.pop(replica, None)

    def _store(self, replica: str, keys: Sequence[int]) -> None:
        mine = self._blocks.setdefault(replica, OrderedDict())
        holders = self._holders
        bit = self._bit(replica)
        for key in keys:
            if key in mine:
                mine.move_to_end(key)
                continue
            mine[key] = None
            holders[key] = holders.get(key, 0) | bit
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

    def _bit(self, replica: str) -> int:
        slot = self._slot.get(replica)
        if slot is None:
            used = set(self._slot.values())
            slot = next(i for i in range(len(used) + 1) if i not in used)
            self._slot[replica] = slot
        return 1 << slot

    def _unhold(self, key: int, replica: str) -> None:
        held = self._holders.get(key)
        if held is not None:
            held &= ~self._bit(replica)
            if held:
                self._holders[key] = held
            else:
                del self._holders[key]

    def leading(self, keys: Sequence[int]) -> dict[str, int]:
        """For each replica, how many of `keys` it holds from the first on."""
        holders = self._holders
        get = holders.get
        first = get(keys[0], 0) if keys else 0
        out: dict[str, int] = {}
        if not first:
            return out
        for replica, slot in self._slot.items():
            bit = 1 << slot
            if not first & bit:
                continue
            # Largest depth d with keys[d - 1] held, given keys[0] is.
            lo, hi = 1, len(keys)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if get(keys[mid - 1], 0) & bit:
                    lo = mid
                else:
                    hi = mid - 1
            out[replica] = lo
        return out

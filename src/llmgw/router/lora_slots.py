"""Which replica holds which LoRA adapter, for models that load adapters on demand
(`max_loaded_adapters`): pure bookkeeping, no I/O.

Each replica has `cap` adapter slots. The book keeps, per replica, the adapters it
holds in least-recently-used order and how many requests each has in flight there. A
request for an adapter goes to replicas already holding it; when none does, to those
with room: a free slot, or a held adapter with nothing in flight that may be unloaded
(the least recently used one). A replica that restarted holds nothing, so the
dispatcher `forget`s it and the book starts it empty.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class _Held:
    # Oldest use first: the front is the first to be unloaded.
    order: OrderedDict[str, None] = field(default_factory=OrderedDict)
    inflight: dict[str, int] = field(default_factory=dict)


class AdapterSlots:
    """The adapters each replica holds, their recency and their requests in flight."""

    def __init__(self) -> None:
        self._replicas: dict[str, _Held] = {}

    def _held(self, replica: str) -> _Held:
        held = self._replicas.get(replica)
        if held is None:
            held = self._replicas[replica] = _Held()
        return held

    def holds(self, replica: str, adapter: str) -> bool:
        held = self._replicas.get(replica)
        return held is not None and adapter in held.order

    def held(self, replica: str) -> list[str]:
        """The adapters `replica` holds, least recently used first."""
        held = self._replicas.get(replica)
        return list(held.order) if held is not None else []

    def victim(self, replica: str, cap: int) -> str | None:
        """The adapter to unload before another can load on `replica`: None when a slot
        is free (or nothing can be unloaded: see `has_room`)."""
        held = self._replicas.get(replica)
        if held is None or len(held.order) < cap:
            return None
        for adapter in held.order:
            if not held.inflight.get(adapter):
                return adapter
        return None

    def has_room(self, replica: str, cap: int) -> bool:
        """Whether another adapter could load on `replica` now."""
        held = self._replicas.get(replica)
        if held is None or len(held.order) < cap:
            return True
        return any(not held.inflight.get(a) for a in held.order)

    def choose(self, adapter: str, replicas: Sequence[str], cap: int) -> list[str]:
        """The replicas among `replicas` a request for `adapter` may go to: those
        holding it, else those with room to load it; empty when every slot is busy."""
        holding = [r for r in replicas if self.holds(r, adapter)]
        if holding:
            return holding
        return [r for r in replicas if self.has_room(r, cap)]

    def loaded(self, replica: str, adapter: str) -> None:
        held = self._held(replica)
        held.order[adapter] = None
        held.order.move_to_end(adapter)

    def unloaded(self, replica: str, adapter: str) -> None:
        held = self._replicas.get(replica)
        if held is not None:
            held.order.pop(adapter, None)

    def begin(self, replica: str, adapter: str) -> None:
        """A request for `adapter` sent to `replica`: it is used now and may not be
        unloaded until `end`."""
        held = self._held(replica)
        held.inflight[adapter] = held.inflight.get(adapter, 0) + 1
        if adapter in held.order:
            held.order.move_to_end(adapter)

    def end(self, replica: str, adapter: str) -> None:
        held = self._replicas.get(replica)
        if held is None:
            return
        left = held.inflight.get(adapter, 0) - 1
        if left > 0:
            held.inflight[adapter] = left
        else:
            held.inflight.pop(adapter, None)

    def forget(self, replica: str) -> None:
        """`replica` restarted or left: it holds nothing. Requests in flight there keep
        their counts so that their `end` stays balanced."""
        held = self._replicas.get(replica)
        if held is not None:
            held.order.clear()

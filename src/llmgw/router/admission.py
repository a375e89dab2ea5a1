"""Admission decisions, as pure functions: who goes now, who waits, who is turned away.

A model's saturation is how close its replicas are to the targets an operator set
(`router.scoring`): the requests this gateway has in flight there (and those already
admitted but not yet sent) against target_inflight per unit of replica weight, and the
queue and KV-cache use of the best replica against target_waiting and kv_ceiling. A
request is admitted while the saturation is under its band's ceiling; otherwise it
waits, highest band first and first come first served within a band.

A model whose replicas all schedule by priority (vLLM's `--scheduling-policy priority`,
`priority_scheduling` on the endpoint) takes each request's band as the engine's request
priority, and the engine preempts worse running work for better. There a request is
judged only against the work it cannot preempt: this gateway's requests of its own band
and the bands above, against the same in-flight target. The engines' queue and KV
readings are left out for such a model, because preempted lower-band work shows there.

When every queue together is full, a newcomer is not refused while a lower band has
someone waiting: the newest of the lowest such band is turned away instead, because
the newest has waited least and a lower band's request is worth least.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from llmgw.router.endpoints import Endpoint
from llmgw.router.scoring import ScoringTargets


@dataclass(frozen=True, slots=True)
class BandRule:
    """One band as admission uses it."""

    name: str
    priority: int
    ceiling: float


def saturation(endpoints: Sequence[Endpoint], pending: int, targets: ScoringTargets, now: float) -> float:
    """How saturated a model's replicas are, 1.0 being at target. A model with no
    replica is infinitely saturated: nothing can be admitted to it."""
    if not endpoints:
        return float("inf")
    # Once per request: one pass over the replicas. The weights keep sum()'s own
    # addition, so the level is the same float whatever sum() does in a Python version.
    capacity = sum([e.weight for e in endpoints]) * targets.target_inflight
    inflight = pending
    best_queue: float | None = None
    best_kv: float | None = None
    stale_after = targets.stale_after
    target_waiting = targets.target_waiting
    kv_ceiling = targets.kv_ceiling
    for e in endpoints:
        inflight += e.inflight
        scraped_at = e.scraped_at
        if scraped_at is None or now - scraped_at > stale_after:
            continue  # a stale reading says nothing about now
        load = e.load
        if load.waiting is not None and target_waiting > 0:
            queue = load.waiting / target_waiting
            if best_queue is None or queue < best_queue:
                best_queue = queue
        if load.kv_usage is not None and kv_ceiling > 0:
            kv = load.kv_usage / kv_ceiling
            if best_kv is None or kv < best_kv:
                best_kv = kv
    level = inflight / capacity if capacity > 0 else 0.0
    return max(level, best_queue or 0.0, best_kv or 0.0)


def preemptive(endpoints: Iterable[Endpoint]) -> bool:
    """Whether every one of a model's replicas schedules by priority (and there is one):
    only then may a band go past lower-band work, since any replica may be chosen."""
    found = False
    for e in endpoints:
        if not e.spec.priority_scheduling:
            return False
        found = True
    return found


def unpreemptable(band: BandRule, bands: Sequence[BandRule], inflight: Mapping[str, int]) -> int:
    """Requests in flight that a request of `band` cannot preempt: those of its band and
    of every band above it."""
    return sum(inflight.get(b.name, 0) for b in bands if b.priority >= band.priority)


def priority_saturation(endpoints: Sequence[Endpoint], ahead: int, targets: ScoringTargets) -> float:
    """Saturation for a model whose replicas preempt by priority: the `ahead` requests a
    newcomer cannot preempt (`unpreemptable`, plus those admitted but not yet sent)
    against the in-flight target, as in `saturation`. Infinite with no replica."""
    if not endpoints:
        return float("inf")
    capacity = sum(e.weight for e in endpoints) * targets.target_inflight
    return ahead / capacity if capacity > 0 else 0.0


def engine_priority(band: BandRule, top: BandRule) -> int:
    """vLLM's request priority for `band`: 0 for the top band, lower served sooner, and
    as far apart as the bands' own priorities."""
    return top.priority - band.priority


def may_admit(band: BandRule, level: float, held_back: bool) -> bool:
    """Whether a request of `band` goes now, at saturation `level`. Under an SLO
    hold-back only the top band is admitted."""
    return not held_back and level < band.ceiling


def shed_band(
    queued: Mapping[str, int], bands: Sequence[BandRule], newcomer: BandRule, total: int, capacity: int
) -> str | None:
    """With every queue together at `capacity`, the band whose newest request makes
    room for `newcomer`: the lowest band below it with anyone waiting. None when the
    queues are not full (nothing to shed) or no lower band waits (refuse the newcomer)."""
    if total < capacity:
        return None
    for band in sorted(bands, key=lambda b: b.priority):
        if band.priority >= newcomer.priority:
            return None
        if queued.get(band.name, 0) > 0:
            return band.name
    return None


def p99(values: Sequence[float]) -> float:
    """The 99th percentile (nearest rank) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(0, -(-99 * len(ordered) // 100) - 1)
    return ordered[rank]

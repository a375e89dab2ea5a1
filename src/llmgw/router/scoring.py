"""How loaded a replica is, as one number: lower is better, 1.0 is "at target".

Three signals, each normalised by the target an operator set (`router.scoring`):
requests the replica has queued (scraped), requests this gateway has in flight there
(live, so it reacts between scrapes), and KV-cache use, which costs little until the
ceiling and a great deal past it, because a replica whose cache is full preempts and
recomputes. A replica not scraped within `stale_after` is treated as at target on the
signals it did not report: scored down, not ruled out, since it may be perfectly well
and only its metrics port slow. The sum is divided by the replica's weight, so a
replica twice as capable is sent twice the load before it scores the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmgw.router.endpoints import Endpoint

# Past the KV ceiling the score climbs this much per unit of cache over it (normalised
# to the room left above the ceiling), so a replica there loses to any with room.
_KV_OVER_CEILING_PENALTY = 4.0


@dataclass(frozen=True, slots=True)
class ScoringTargets:
    """`router.scoring` and `router.stale_after`, in plain numbers for the hot path."""

    target_waiting: float
    target_inflight: float
    kv_ceiling: float
    session_load_factor: float
    stale_after: float


def kv_term(kv_usage: float, ceiling: float) -> float:
    """The KV-cache part of the score: linear to 1.0 at the ceiling, steep beyond it."""
    if ceiling <= 0:
        return 0.0
    if kv_usage <= ceiling:
        return kv_usage / ceiling
    room = max(1.0 - ceiling, 1e-6)
    return 1.0 + _KV_OVER_CEILING_PENALTY * (kv_usage - ceiling) / room


def load_score(endpoint: Endpoint, targets: ScoringTargets, now: float) -> float:
    """The replica's load against the targets, per unit of weight."""
    target_inflight = targets.target_inflight
    score = endpoint.inflight / target_inflight if target_inflight > 0 else 0.0
    scraped_at = endpoint.scraped_at
    if scraped_at is None or not now - scraped_at <= targets.stale_after:
        return (score + 1.0) / endpoint.weight
    load = endpoint.load
    waiting = load.waiting
    if waiting is not None:
        score += waiting / targets.target_waiting if targets.target_waiting > 0 else 0.0
    kv_usage = load.kv_usage
    if kv_usage is not None:
        score += kv_term(kv_usage, targets.kv_ceiling)
    return score / endpoint.weight

"""Choosing the replica for one request: the routing profiles.

`chat` (the default) keeps a conversation where its cache is (session affinity on
`router.session_header`, held while that replica's load stays within
`session_load_factor` of the best), then follows the prompt's longest recently served
prefix (the approximate prefix tree, when `router.prefix.enabled`) unless the replicas'
in-flight counts are out of balance by both guards, and otherwise takes the least
loaded. `least_load` only takes the least loaded; `round_robin` only takes turns.

Replicas of a higher `priority` are preferred while any of them is below target load;
when all are at or past it, lower ones share the load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llmgw.router.affinity import SessionAffinity
from llmgw.router.balance import imbalanced, session_holds
from llmgw.router.endpoints import Endpoint
from llmgw.router.prefix_tree import PrefixTree, PrefixWalk
from llmgw.router.scoring import ScoringTargets, load_score

ROUTING_PROFILES: tuple[str, ...] = ("chat", "least_load", "round_robin")


@dataclass(frozen=True, slots=True)
class PrefixRules:
    """`router.prefix` in plain numbers."""

    min_match: int
    match_ratio: float
    balance_abs: float
    balance_rel: float


class Picker:
    """Picks a replica among candidates the breakers allow."""

    def __init__(
        self,
        targets: ScoringTargets,
        affinity: SessionAffinity,
        tree: PrefixTree | None,
        prefix_rules: PrefixRules,
    ) -> None:
        self._targets = targets
        self._affinity = affinity
        self._tree = tree
        self._rules = prefix_rules
        self._turn = 0

    def forget(self, endpoint_id: str) -> None:
        """A withdrawn replica: nothing should be routed to it by memory."""
        self._affinity.forget_endpoint(endpoint_id)
        if self._tree is not None:
            self._tree.remove_endpoint(endpoint_id)

    def pick(
        self, candidates: Sequence[Endpoint], prompt: str, session: str | None, profile: str, now: float
    ) -> tuple[Endpoint, str]:
        """The replica for this request and why it was chosen; `candidates` is non-empty."""
        # The prompt is followed down the tree once, for the match and the insert alike.
        walk = self._tree.walk(prompt) if profile == "chat" and self._tree is not None and prompt else None
        if len(candidates) == 1:
            chosen, why = candidates[0], "only"
        elif profile == "round_robin":
            self._turn += 1
            chosen, why = candidates[self._turn % len(candidates)], "round_robin"
        else:
            chosen, why = self._by_load(candidates, prompt, walk, session, profile, now)
        if profile == "chat" and session:
            self._affinity.set(session, chosen.id, now)
        if walk is not None:
            walk.insert(chosen.id, now)
        return chosen, why

    def _by_load(
        self,
        candidates: Sequence[Endpoint],
        prompt: str,
        walk: PrefixWalk | None,
        session: str | None,
        profile: str,
        now: float,
    ) -> tuple[Endpoint, str]:
        targets = self._targets
        scored = [(load_score(e, targets, now), e) for e in candidates]
        pool = _preferred_tier(scored)
        best_score, best = self._least(pool)
        if profile != "chat":
            return best, "load"
        if session:
            held_id = self._affinity.get(session, now)
            if held_id is not None:
                # Only within the preferred tier: a conversation that spilled to a lower
                # tier in a burst goes back up once there is room there.
                for score, held in pool:
                    if held.id == held_id:
                        if session_holds(score, best_score, targets.session_load_factor):
                            return held, "session"
                        break
        if walk is not None:
            match = walk.match(now)
            rules = self._rules
            found = match.by_endpoint
            # The thresholds apply to what the candidates hold: a replica left out (tried
            # already, breaker open, lower tier) may hold a longer match that is no use.
            top = max((found.get(e.id, 0) for _, e in pool), default=0) if found else 0
            if (
                top > 0
                and top >= rules.min_match
                and top >= rules.match_ratio * len(prompt)
                and not imbalanced([float(e.inflight) for _, e in pool], rules.balance_abs, rules.balance_rel)
            ):
                _, chosen = self._least([(s, e) for s, e in pool if found.get(e.id, 0) == top])
                return chosen, "prefix"
        return best, "load"

    def _least(self, pool: Sequence[tuple[float, Endpoint]]) -> tuple[float, Endpoint]:
        """The lowest score; ties go round in turn, so equal replicas share the load."""
        low = min(score for score, _ in pool)
        tied = [e for score, e in pool if score == low]
        if len(tied) == 1:
            return low, tied[0]
        self._turn += 1
        return low, tied[self._turn % len(tied)]


def _preferred_tier(scored: list[tuple[float, Endpoint]]) -> list[tuple[float, Endpoint]]:
    """The highest-priority replicas while any of them is below target, else all."""
    top = max(e.priority for _, e in scored)
    tier = [(s, e) for s, e in scored if e.priority == top]
    if len(tier) == len(scored) or any(s < 1.0 for s, _ in tier):
        return tier
    return scored

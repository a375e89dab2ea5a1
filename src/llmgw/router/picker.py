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
        kv_min_blocks: int = 4,
    ) -> None:
        self._targets = targets
        self._affinity = affinity
        self._tree = tree
        self._rules = prefix_rules
        self._turn = 0
        self._kv_min = kv_min_blocks

    def forget(self, endpoint_id: str) -> None:
        """A withdrawn replica: nothing should be routed to it by memory."""
        self._affinity.forget_endpoint(endpoint_id)
        if self._tree is not None:
            self._tree.remove_endpoint(endpoint_id)

    def pick(
        self,
        candidates: Sequence[Endpoint],
        prompt: str,
        session: str | None,
        profile: str,
        now: float,
        kv: dict[str, int] | None = None,
    ) -> tuple[Endpoint, str]:
        """The replica for this request and why it was chosen; `candidates` is non-empty.
        `kv` is the KV index's count of leading prompt blocks per replica, when it has one."""
        # The prompt is followed down the tree once, for the match and the insert alike.
        walk = self._tree.walk(prompt) if profile == "chat" and self._tree is not None and prompt else None
        if len(candidates) == 1:
            chosen, why = candidates[0], "only"
        elif profile == "round_robin":
            self._turn += 1
            chosen, why = candidates[self._turn % len(candidates)], "round_robin"
        else:
            chosen, why = self._by_load(candidates, prompt, walk, session, profile, now, kv)
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
        kv: dict[str, int] | None = None,
    ) -> tuple[Endpoint, str]:
        targets = self._targets
        # The pool and its scores are kept as two lists side by side: this runs for every
        # request, and pairing them up in tuples cost more than the scoring itself.
        pool: Sequence[Endpoint] = candidates
        scores = [load_score(e, targets, now) for e in candidates]
        top = candidates[0].priority
        for e in candidates:
            if e.priority != top:
                pool, scores = _preferred_tier(candidates, scores)
                break
        best_score, best = self._least(pool, scores)
        if profile != "chat":
            return best, "load"
        if session:
            held_id = self._affinity.get(session, now)
            if held_id is not None:
                # Only within the preferred tier: a conversation that spilled to a lower
                # tier in a burst goes back up once there is room there.
                for held, score in zip(pool, scores, strict=True):
                    if held.id == held_id:
                        if session_holds(score, best_score, targets.session_load_factor):
                            return held, "session"
                        break
        if kv:
            # Tier 0: what the replicas report they hold, exactly; balanced as tier 1 is.
            lengths = [kv.get(e.id, 0) for e in pool]
            longest = max(lengths)
            if longest >= max(1, self._kv_min) and not imbalanced(
                [e.inflight for e in pool], self._rules.balance_abs, self._rules.balance_rel
            ):
                return self._longest(pool, scores, lengths, longest), "kv"
        if walk is not None:
            match = walk.match(now)
            found = match.by_endpoint
            if not found:
                return best, "load"
            rules = self._rules
            # The thresholds apply to what the candidates hold: a replica left out (tried
            # already, breaker open, lower tier) may hold a longer match that is no use.
            lengths = [found.get(e.id, 0) for e in pool]
            longest = max(lengths)
            if (
                longest > 0
                and longest >= rules.min_match
                and longest >= rules.match_ratio * len(prompt)
                and not imbalanced([e.inflight for e in pool], rules.balance_abs, rules.balance_rel)
            ):
                return self._longest(pool, scores, lengths, longest), "prefix"
        return best, "load"

    def _longest(
        self, pool: Sequence[Endpoint], scores: list[float], lengths: list[int], longest: int
    ) -> Endpoint:
        """The replica with the longest match; among several, the least loaded."""
        holders = lengths.count(longest)
        if holders == 1:
            return pool[lengths.index(longest)]
        if holders < len(lengths):
            keep = [i for i, n in enumerate(lengths) if n == longest]
            pool, scores = [pool[i] for i in keep], [scores[i] for i in keep]
        _, chosen = self._least(pool, scores)
        return chosen

    def _least(self, pool: Sequence[Endpoint], scores: list[float]) -> tuple[float, Endpoint]:
        """The lowest score (`scores` are `pool`'s, in order); ties go round in turn, so
        equal replicas share the load."""
        low = min(scores)
        ties = scores.count(low)
        if ties == 1:
            return low, pool[scores.index(low)]
        # All equal is the common case on idle replicas: no list to build.
        tied = (
            pool if ties == len(pool) else [e for e, score in zip(pool, scores, strict=True) if score == low]
        )
        self._turn += 1
        return low, tied[self._turn % len(tied)]


def _preferred_tier(
    candidates: Sequence[Endpoint], scores: list[float]
) -> tuple[Sequence[Endpoint], list[float]]:
    """The highest-priority replicas while any of them is below target, else all; with
    their scores."""
    top = max(e.priority for e in candidates)
    tier = [i for i, e in enumerate(candidates) if e.priority == top]
    if len(tier) == len(candidates) or any(scores[i] < 1.0 for i in tier):
        return [candidates[i] for i in tier], [scores[i] for i in tier]
    return candidates, scores

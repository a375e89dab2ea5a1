"""Choosing the replica for one request, rule by rule, in named scenarios: the profiles
(chat, least_load, round_robin), priority tiers, session affinity, prefix routing and
its balance guard, and turns among equals. Loads are set by hand; the clock is passed in."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

import pytest

from llmgw.engines.load import EngineLoad
from llmgw.router.affinity import SessionAffinity
from llmgw.router.breaker import Breaker
from llmgw.router.endpoints import Endpoint, EndpointSpec
from llmgw.router.picker import ROUTING_PROFILES, Picker, PrefixRules
from llmgw.router.prefix_tree import PrefixTree
from llmgw.router.scoring import ScoringTargets
from llmgw.upstream import UpstreamClient

NOW = 5000.0
# A score of 1.0 is 4 in flight; sessions hold up to 1.5 x the best (floored at 1.0).
TARGETS = ScoringTargets(
    target_waiting=8.0, target_inflight=4.0, kv_ceiling=0.8, session_load_factor=1.5, stale_after=10.0
)
# A prefix counts from 8 characters and half the prompt; in flight differing by more
# than 4 and by more than 1.5x is out of balance.
RULES = PrefixRules(min_match=8, match_ratio=0.5, balance_abs=4.0, balance_rel=1.5)
TREE_TTL = 120.0
SESSION_TTL = 600.0

PROMPT = "system\nYou are a careful reviewer.\nuser\nSummarise the attached contract in five bullet points.\n"
FOLLOW_UP = PROMPT + "assistant\n- One\n- Two\nuser\nNow in French.\n"

_CLIENT = UpstreamClient()


def replica(
    rid: str, *, inflight: int = 0, priority: int = 0, scraped_at: float | None = NOW, weight: float = 1.0
) -> Endpoint:
    spec = EndpointSpec(
        id=rid, url=f"http://{rid}.internal:8000/v1", models=("chat",), priority=priority, weight=weight
    )
    e = Endpoint(spec, _CLIENT.pool_for(spec.url), Breaker(3, 10.0))
    e.inflight = inflight
    e.load = EngineLoad(waiting=0.0, running=float(inflight), kv_usage=0.0)
    e.scraped_at = scraped_at
    return e


class World:
    """A picker with its affinity table and prefix tree in reach."""

    def __init__(self, *, tree: bool = True) -> None:
        self.affinity = SessionAffinity(max_sessions=100, ttl=SESSION_TTL)
        self.tree = PrefixTree(max_nodes=1000, ttl=TREE_TTL) if tree else None
        self.picker = Picker(TARGETS, self.affinity, self.tree, RULES)

    def pick(
        self,
        candidates: Sequence[Endpoint],
        prompt: str = PROMPT,
        session: str | None = None,
        profile: str = "chat",
        now: float = NOW,
    ) -> tuple[str, str]:
        chosen, why = self.picker.pick(candidates, prompt, session, profile, now)
        return chosen.id, why

    def served(self, prompt: str, rid: str, at: float = NOW - 1.0) -> None:
        assert self.tree is not None
        self.tree.insert(prompt, rid, at)


def test_the_profiles() -> None:
    assert ROUTING_PROFILES == ("chat", "least_load", "round_robin")


# --- one candidate ----------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ROUTING_PROFILES)
def test_a_single_candidate_is_taken_whatever_its_load(profile: str) -> None:
    world = World()
    assert world.pick([replica("a", inflight=50, scraped_at=None)], profile=profile) == ("a", "only")


def test_a_chat_pick_is_remembered_for_the_session_and_the_prefix() -> None:
    world = World()
    world.pick([replica("a")], session="conv-1")
    assert world.affinity.get("conv-1", NOW) == "a"
    assert world.tree is not None
    assert world.tree.match(PROMPT, NOW).by_endpoint == {"a": len(PROMPT)}


@pytest.mark.parametrize("profile", ["least_load", "round_robin"])
def test_other_profiles_remember_nothing(profile: str) -> None:
    world = World()
    world.pick([replica("a"), replica("b", inflight=1)], session="conv-1", profile=profile)
    world.pick([replica("a")], session="conv-2", profile=profile)
    assert len(world.affinity) == 0
    assert world.tree is not None
    assert len(world.tree) == 0


# --- least load, round robin, turns -------------------------------------------------------------

LEAST_CASES = [
    pytest.param([("a", 3), ("b", 1), ("c", 2)], "b", id="fewest-in-flight"),
    pytest.param([("a", 0), ("b", 5)], "a", id="idle-beats-busy"),
    pytest.param([("a", 9), ("b", 8)], "b", id="all-past-target-still-least"),
]


@pytest.mark.parametrize("profile", ["chat", "least_load"])
@pytest.mark.parametrize(("loads", "expected"), LEAST_CASES)
def test_the_least_loaded_is_taken(profile: str, loads: list[tuple[str, int]], expected: str) -> None:
    world = World()
    candidates = [replica(rid, inflight=n) for rid, n in loads]
    assert world.pick(candidates, profile=profile) == (expected, "load")


def test_least_load_follows_the_score_not_the_count() -> None:
    # b has fewer in flight but a full KV cache; c was never scraped; a is twice as big.
    a = replica("a", inflight=3, weight=2.0)  # 0.375
    b = replica("b", inflight=1)
    b.load = EngineLoad(waiting=0.0, kv_usage=0.95)  # 0.25 + 4.0
    c = replica("c", scraped_at=None)  # 1.0
    assert World().pick([a, b, c], profile="least_load") == ("a", "load")


def test_least_load_ignores_session_and_prefix() -> None:
    world = World()
    world.affinity.set("conv-1", "a", NOW - 1.0)
    world.served(PROMPT, "a")
    picked = world.pick([replica("a", inflight=1), replica("b")], session="conv-1", profile="least_load")
    assert picked == ("b", "load")


def test_round_robin_takes_turns_whatever_the_load() -> None:
    world = World()
    candidates = [replica("a", inflight=40), replica("b"), replica("c", scraped_at=None)]
    picks = [world.pick(candidates, profile="round_robin") for _ in range(6)]
    assert {why for _, why in picks} == {"round_robin"}
    ids = [rid for rid, _ in picks]
    assert Counter(ids) == {"a": 2, "b": 2, "c": 2}
    assert ids[:3] == ids[3:]
    assert all(x != y for x, y in itertools.pairwise(ids))


def test_ties_are_broken_in_turn() -> None:
    world = World()
    candidates = [replica("a"), replica("b"), replica("c")]
    ids = [world.pick(candidates, prompt="", profile="least_load")[0] for _ in range(6)]
    assert Counter(ids) == {"a": 2, "b": 2, "c": 2}


def test_turns_go_only_among_the_tied() -> None:
    world = World()
    candidates = [replica("a"), replica("b"), replica("c", inflight=1)]
    ids = [world.pick(candidates, prompt="", profile="least_load")[0] for _ in range(6)]
    assert Counter(ids) == {"a": 3, "b": 3}


# --- priority tiers -------------------------------------------------------------------------------

TIER_CASES = [
    pytest.param([("hi", 1, 2), ("lo", 0, 0)], "hi", id="higher-tier-below-target-is-preferred"),
    pytest.param([("hi", 1, 4), ("lo", 0, 0)], "lo", id="higher-tier-at-target-shares-with-lower"),
    pytest.param([("hi", 1, 6), ("lo", 0, 5)], "lo", id="all-past-target-least-loaded-anywhere"),
    pytest.param([("hi1", 1, 4), ("hi2", 1, 3), ("lo", 0, 0)], "hi2", id="one-of-the-tier-below-target"),
    pytest.param([("hi1", 1, 4), ("hi2", 1, 5), ("lo", 0, 0)], "lo", id="whole-tier-at-or-past-target"),
    pytest.param([("a", 0, 2), ("b", 0, 1)], "b", id="one-tier-is-plain-least-load"),
]


@pytest.mark.parametrize("profile", ["chat", "least_load"])
@pytest.mark.parametrize(("setup", "expected"), TIER_CASES)
def test_priority_tiers(profile: str, setup: list[tuple[str, int, int]], expected: str) -> None:
    candidates = [replica(rid, priority=p, inflight=n) for rid, p, n in setup]
    assert World().pick(candidates, profile=profile) == (expected, "load")


def test_ties_within_the_preferred_tier_take_turns() -> None:
    world = World()
    candidates = [
        replica("hi1", priority=1, inflight=1),
        replica("lo"),
        replica("hi2", priority=1, inflight=1),
    ]
    ids = [world.pick(candidates, prompt="", profile="least_load")[0] for _ in range(4)]
    assert Counter(ids) == {"hi1": 2, "hi2": 2}


def test_an_unscraped_higher_tier_counts_as_at_target() -> None:
    candidates = [replica("hi", priority=1, scraped_at=None), replica("lo")]
    assert World().pick(candidates) == ("lo", "load")


# --- session affinity -----------------------------------------------------------------------------

SESSION_CASES = [
    pytest.param(0, 0, "a", "session", id="equal-load-held"),
    pytest.param(2, 0, "a", "session", id="busier-within-the-floor-held"),
    pytest.param(6, 0, "a", "session", id="exactly-at-the-floor-times-factor-held"),
    pytest.param(7, 0, "b", "load", id="past-the-factor-moves"),
    pytest.param(12, 8, "a", "session", id="busy-pair-within-factor-held"),
    pytest.param(13, 8, "b", "load", id="busy-pair-past-factor-moves"),
]


@pytest.mark.parametrize(("held_inflight", "other_inflight", "expected", "why"), SESSION_CASES)
def test_a_session_stays_while_its_replica_is_within_the_factor(
    held_inflight: int, other_inflight: int, expected: str, why: str
) -> None:
    world = World(tree=False)
    world.affinity.set("conv-1", "a", NOW - 30.0)
    candidates = [replica("a", inflight=held_inflight), replica("b", inflight=other_inflight)]
    assert world.pick(candidates, session="conv-1") == (expected, why)
    assert world.affinity.get("conv-1", NOW) == expected


def test_a_new_session_is_bound_to_where_it_went() -> None:
    world = World(tree=False)
    rid, _ = world.pick([replica("a", inflight=1), replica("b")], session="conv-new")
    assert rid == "b"
    # Later the other replica is less loaded, within the factor: the session stays.
    assert world.pick([replica("a"), replica("b", inflight=2)], session="conv-new") == ("b", "session")


def test_an_expired_session_is_routed_by_load() -> None:
    world = World(tree=False)
    world.affinity.set("conv-1", "a", NOW - SESSION_TTL)
    assert world.pick([replica("a", inflight=1), replica("b")], session="conv-1") == ("b", "load")


def test_a_session_whose_replica_is_not_a_candidate_moves() -> None:
    # Its replica's breaker is open, or it was just tried: the session goes elsewhere, and stays there.
    world = World(tree=False)
    world.affinity.set("conv-1", "gone", NOW - 1.0)
    assert world.pick([replica("a", inflight=1), replica("b")], session="conv-1") == ("b", "load")
    assert world.affinity.get("conv-1", NOW) == "b"


def test_other_sessions_are_not_held() -> None:
    world = World(tree=False)
    world.affinity.set("conv-1", "a", NOW - 1.0)
    assert world.pick([replica("a", inflight=1), replica("b")], session="conv-2") == ("b", "load")


def test_session_comes_before_prefix() -> None:
    world = World()
    world.affinity.set("conv-1", "a", NOW - 1.0)
    world.served(PROMPT, "b")
    candidates = [replica("a", inflight=1), replica("b", inflight=2), replica("c")]
    assert world.pick(candidates, prompt=FOLLOW_UP, session="conv-1") == ("a", "session")


# --- prefix routing --------------------------------------------------------------------------------


def test_a_prompt_goes_where_its_prefix_was_served() -> None:
    world = World()
    world.served(PROMPT, "a")
    candidates = [replica("a", inflight=2), replica("b"), replica("c")]
    assert world.pick(candidates, prompt=FOLLOW_UP) == ("a", "prefix")


PREFIX_MISS_CASES = [
    # "user\nH" in common: 6 characters, most of the prompt but under min_match.
    pytest.param("user\nHey\n", "user\nHi\n", id="under-min-match-though-over-the-ratio"),
    pytest.param(FOLLOW_UP[: len(FOLLOW_UP) // 2 - 1], FOLLOW_UP, id="over-min-match-though-under-the-ratio"),
    pytest.param("user\nSomething else entirely, and long enough.\n", FOLLOW_UP, id="no-common-prefix"),
]


@pytest.mark.parametrize(("stored", "prompt"), PREFIX_MISS_CASES)
def test_a_short_match_is_routed_by_load(stored: str, prompt: str) -> None:
    world = World()
    world.served(stored, "a")
    assert world.pick([replica("a", inflight=2), replica("b")], prompt=prompt) == ("b", "load")


def test_a_match_at_exactly_the_ratio_counts() -> None:
    world = World()
    half = FOLLOW_UP[: len(FOLLOW_UP) // 2 + len(FOLLOW_UP) % 2]
    assert len(half) >= RULES.match_ratio * len(FOLLOW_UP) > len(half) - 1
    world.served(half, "a")
    assert world.pick([replica("a", inflight=2), replica("b")], prompt=FOLLOW_UP) == ("a", "prefix")


def test_an_expired_prefix_is_routed_by_load() -> None:
    world = World()
    world.served(PROMPT, "a", at=NOW - TREE_TTL)
    assert world.pick([replica("a", inflight=2), replica("b")], prompt=FOLLOW_UP) == ("b", "load")


BALANCE_CASES = [
    pytest.param(4, 0, "a", "prefix", id="gap-at-the-absolute-bound-keeps-the-prefix"),
    pytest.param(5, 0, "b", "load", id="both-guards-exceeded-gives-it-up"),
    pytest.param(12, 8, "a", "prefix", id="relative-only-keeps-the-prefix"),
    pytest.param(13, 9, "a", "prefix", id="absolute-only-keeps-the-prefix"),
]


@pytest.mark.parametrize(("holder", "other", "expected", "why"), BALANCE_CASES)
def test_prefix_routing_gives_way_when_in_flight_is_out_of_balance(
    holder: int, other: int, expected: str, why: str
) -> None:
    world = World()
    world.served(PROMPT, "a")
    candidates = [replica("a", inflight=holder), replica("b", inflight=other)]
    assert world.pick(candidates, prompt=FOLLOW_UP) == (expected, why)


def test_the_longest_holder_wins() -> None:
    world = World()
    world.served(PROMPT, "a")
    world.served(PROMPT[:70], "b")
    candidates = [replica("a", inflight=3), replica("b", inflight=1), replica("c")]
    assert world.pick(candidates, prompt=FOLLOW_UP) == ("a", "prefix")


def test_among_equal_holders_the_least_loaded_wins() -> None:
    world = World()
    world.served(PROMPT, "a")
    world.served(PROMPT, "b")
    candidates = [replica("a", inflight=3), replica("b", inflight=1), replica("c")]
    assert world.pick(candidates, prompt=FOLLOW_UP) == ("b", "prefix")


@pytest.mark.parametrize("others", [0, 1], ids=["every-candidate-holds-it", "one-holds-nothing"])
def test_equal_holders_equally_loaded_take_turns(others: int) -> None:
    world = World()
    for rid in ("a", "b", "c"):
        world.served(PROMPT, rid)
    candidates = [replica("a"), replica("b"), replica("c")] + [replica(f"x{i}") for i in range(others)]
    picks = [world.pick(candidates, prompt=PROMPT) for _ in range(6)]
    assert {why for _, why in picks} == {"prefix"}
    assert Counter(rid for rid, _ in picks) == {"a": 2, "b": 2, "c": 2}


def test_prefix_routing_stays_within_the_preferred_tier() -> None:
    world = World()
    world.served(PROMPT, "lo")
    candidates = [replica("hi", priority=1, inflight=1), replica("lo")]
    assert world.pick(candidates, prompt=FOLLOW_UP) == ("hi", "load")


def test_without_a_tree_there_is_no_prefix_routing() -> None:
    world = World(tree=False)
    assert world.pick([replica("a", inflight=1), replica("b")], prompt=FOLLOW_UP) == ("b", "load")


def test_an_empty_prompt_is_routed_by_load_and_not_recorded() -> None:
    # A completion given as token ids has no text to key on.
    world = World()
    world.served(PROMPT, "a")
    assert world.pick([replica("a", inflight=1), replica("b")], prompt="") == ("b", "load")
    assert world.tree is not None
    assert world.tree.size_of("b") == 0


def test_each_chat_pick_teaches_the_tree() -> None:
    world = World()
    first, _ = world.pick([replica("a", inflight=1), replica("b")], prompt=PROMPT)
    assert first == "b"
    # The follow-up goes where the first turn went, though that replica is now busier.
    assert world.pick([replica("a"), replica("b", inflight=2)], prompt=FOLLOW_UP) == ("b", "prefix")


def test_forget_drops_sessions_and_prefixes_of_a_withdrawn_replica() -> None:
    world = World()
    world.pick([replica("a")], prompt=PROMPT, session="conv-1")
    world.picker.forget("a")
    assert world.affinity.get("conv-1", NOW) is None
    assert world.tree is not None
    assert world.tree.match(PROMPT, NOW).by_endpoint == {}
    assert world.pick([replica("a", inflight=1), replica("b")], prompt=FOLLOW_UP, session="conv-1") == (
        "b",
        "load",
    )


# --- known bugs -------------------------------------------------------------------------------------


def test_a_prefix_held_only_by_a_non_candidate_does_not_route_by_prefix() -> None:
    world = World()
    prompt = "user\nSummarise the attached contract in five bullet points.\n"
    world.served(prompt, "failed")  # the replica just tried, which the retry leaves out
    world.served("user\nhi\n", "a")  # shares only the role, 'user\n', with the prompt
    candidates = [replica("a", inflight=1), replica("b")]
    assert world.pick(candidates, prompt=prompt) == ("b", "load")


def test_a_session_does_not_hold_a_lower_tier_while_the_higher_has_room() -> None:
    world = World(tree=False)
    world.affinity.set("conv-1", "spill", NOW - 1.0)  # went there while the tier was full
    candidates = [replica("own", priority=1, inflight=1), replica("spill", priority=0)]
    assert world.pick(candidates, session="conv-1") == ("own", "load")

"""The approximate prefix tree: matches, ttl, per-endpoint sizes, withdrawal, pruning,
and the node bound with least-recently-used eviction."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgw.router.prefix_tree import PrefixMatch, PrefixTree

# Texts from a small alphabet share prefixes often, which is where the tree has work to do.
_texts = st.text(alphabet="abcé", max_size=12)
_endpoints = st.sampled_from(["e1", "e2", "e3"])


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class _Reference:
    """What the tree should answer if it forgot nothing: every insert kept as a list."""

    ttl: float
    inserts: list[tuple[str, str, float]] = field(default_factory=list)

    def by_endpoint(self, text: str, now: float) -> dict[str, int]:
        out: dict[str, int] = {}
        for stored, endpoint, at in self.inserts:
            if at > now - self.ttl:
                common = _common(stored, text)
                if common:
                    out[endpoint] = max(out.get(endpoint, 0), common)
        return out

    def size_of(self, endpoint: str) -> int:
        return len({t[:i] for t, e, _ in self.inserts if e == endpoint for i in range(1, len(t) + 1)})


# --- matching ---------------------------------------------------------------------------

MATCH_CASES = [
    pytest.param([], "anything", 0, {}, id="empty-tree"),
    pytest.param([("hello world", "a")], "hello world", 11, {"a": 11}, id="exact"),
    pytest.param([("hello world", "a")], "hello world, again", 11, {"a": 11}, id="query-longer"),
    pytest.param([("hello world", "a")], "help", 3, {"a": 3}, id="parts-inside-an-edge"),
    pytest.param([("hello world", "a")], "he", 2, {"a": 2}, id="query-ends-inside-an-edge"),
    pytest.param([("hello world", "a")], "goodbye", 0, {}, id="no-common-first-character"),
    pytest.param([("hello world", "a")], "", 0, {}, id="empty-query"),
    pytest.param(
        [("abcdef", "a"), ("abcxyz", "b")], "abcdez", 5, {"a": 5, "b": 3}, id="two-endpoints-diverge"
    ),
    pytest.param([("abcdef", "a"), ("abcxyz", "b")], "abq", 2, {"a": 2, "b": 2}, id="before-the-split"),
    pytest.param([("abc", "a"), ("abcdef", "a")], "abcdeX", 5, {"a": 5}, id="extends-a-leaf"),
    pytest.param([("abcdef", "a"), ("abc", "b")], "abcdef", 6, {"a": 6, "b": 3}, id="prefix-of-an-edge"),
    pytest.param([("naïve ☃ 文字", "a")], "naïve ☃ 文", 9, {"a": 9}, id="non-ascii-counts-characters"),
]


@pytest.mark.parametrize(("inserts", "query", "longest", "by_endpoint"), MATCH_CASES)
def test_match(inserts: list[tuple[str, str]], query: str, longest: int, by_endpoint: dict[str, int]) -> None:
    tree = PrefixTree(max_nodes=100, ttl=60.0)
    for text, endpoint in inserts:
        tree.insert(text, endpoint, now=1.0)
    assert tree.match(query, now=2.0) == PrefixMatch(longest, by_endpoint)


def test_a_long_mismatch_is_found_at_the_exact_character() -> None:
    tree = PrefixTree(max_nodes=100, ttl=60.0)
    base = "x" * 4000
    tree.insert(base + "A" * 100, "a", now=1.0)
    for cut in (0, 1, 2047, 4000, 4050, 4099):
        query = base + "A" * 100
        query = query[:cut] + "B" + query[cut + 1 :]
        assert tree.match(query, now=1.0).longest == cut


def test_match_result_unpacks_as_a_pair() -> None:
    tree = PrefixTree(max_nodes=10, ttl=60.0)
    tree.insert("abc", "a", now=0.0)
    longest, by_endpoint = tree.match("abd", now=0.0)
    assert (longest, by_endpoint) == (2, {"a": 2})


# --- ttl --------------------------------------------------------------------------------


def test_an_entry_counts_until_it_is_ttl_old() -> None:
    tree = PrefixTree(max_nodes=10, ttl=10.0)
    tree.insert("system prompt", "a", now=100.0)
    assert tree.match("system prompt", now=109.99).longest == 13
    assert tree.match("system prompt", now=110.0) == PrefixMatch(0, {})


def test_a_late_report_for_a_new_endpoint_can_be_already_expired() -> None:
    tree = PrefixTree(max_nodes=10, ttl=10.0)
    tree.insert("abc", "a", now=8.0)
    assert tree.match("abc", now=9.0) == PrefixMatch(3, {"a": 3})
    tree.insert("abc", "b", now=1.0)
    assert tree.match("abc", now=12.0) == PrefixMatch(3, {"a": 3})


def test_each_endpoint_ages_on_its_own() -> None:
    tree = PrefixTree(max_nodes=10, ttl=10.0)
    tree.insert("shared prefix", "old", now=0.0)
    tree.insert("shared prefix", "new", now=5.0)
    assert tree.match("shared prefix", now=12.0) == PrefixMatch(13, {"new": 13})
    assert tree.match("shared prefix", now=13.0) == PrefixMatch(13, {"new": 13})  # and stays out
    assert tree.match("shared prefix", now=15.0) == PrefixMatch(0, {})


def test_inserting_again_renews_only_the_path_inserted() -> None:
    tree = PrefixTree(max_nodes=10, ttl=10.0)
    tree.insert("abcdef", "a", now=0.0)
    tree.insert("abc", "a", now=8.0)
    assert tree.match("abcdef", now=12.0) == PrefixMatch(3, {"a": 3})


def test_a_late_insert_with_an_older_time_does_not_age_an_entry() -> None:
    tree = PrefixTree(max_nodes=10, ttl=10.0)
    tree.insert("abc", "a", now=8.0)
    tree.insert("abc", "a", now=1.0)
    assert tree.match("abc", now=12.0) == PrefixMatch(3, {"a": 3})


# --- sizes and withdrawal ---------------------------------------------------------------


def test_size_of_counts_each_endpoints_characters_once() -> None:
    tree = PrefixTree(max_nodes=100, ttl=60.0)
    tree.insert("abcdef", "a", now=0.0)
    tree.insert("abcxyz", "a", now=0.0)
    tree.insert("abcdef", "a", now=1.0)
    tree.insert("abc", "b", now=1.0)
    assert tree.size_of("a") == 9
    assert tree.size_of("b") == 3
    assert tree.size_of("never-seen") == 0


def test_remove_endpoint_forgets_it_and_drops_the_nodes_only_it_held() -> None:
    tree = PrefixTree(max_nodes=100, ttl=60.0)
    tree.insert("abcdef", "a", now=0.0)
    tree.insert("abcxyz", "b", now=0.0)
    assert len(tree) == 3
    tree.remove_endpoint("a")
    assert len(tree) == 2
    assert tree.size_of("a") == 0
    assert tree.size_of("b") == 6
    assert tree.match("abcdef", now=1.0) == PrefixMatch(3, {"b": 3})
    assert tree.match("abcxyz", now=1.0) == PrefixMatch(6, {"b": 6})
    tree.remove_endpoint("b")
    assert len(tree) == 0
    assert tree.match("abcxyz", now=1.0) == PrefixMatch(0, {})


def test_after_a_removal_only_the_remaining_entries_decide_what_is_live() -> None:
    tree = PrefixTree(max_nodes=100, ttl=10.0)
    tree.insert("abc", "b", now=0.0)
    tree.insert("abc", "a", now=8.0)
    tree.remove_endpoint("a")
    assert tree.match("abc", now=12.0) == PrefixMatch(0, {})


def test_prune_drops_expired_entries_and_their_nodes() -> None:
    tree = PrefixTree(max_nodes=100, ttl=10.0)
    tree.insert("abcdef", "a", now=0.0)
    tree.insert("abcxyz", "b", now=5.0)
    tree.insert("abcxyz", "a", now=1.0)
    assert tree.prune(now=10.5) == 1  # "def" held only a's entry from t=0
    assert len(tree) == 2
    assert tree.size_of("a") == 6  # a's entries below "abc" from t=1 remain
    assert tree.size_of("b") == 6
    assert tree.prune(now=11.0) == 0
    assert tree.size_of("a") == 0
    assert tree.prune(now=15.0) == 2
    assert len(tree) == 0
    assert tree.size_of("b") == 0


# --- the node bound ---------------------------------------------------------------------


def test_the_least_recently_touched_leaf_is_evicted_first() -> None:
    tree = PrefixTree(max_nodes=3, ttl=60.0)
    tree.insert("aaa", "e", now=1.0)
    tree.insert("bbb", "e", now=2.0)
    tree.insert("ccc", "e", now=3.0)
    tree.insert("ddd", "e", now=4.0)
    assert len(tree) == 3
    assert tree.match("aaa", now=4.0).longest == 0
    assert [tree.match(t, now=4.0).longest for t in ("bbb", "ccc", "ddd")] == [3, 3, 3]
    assert tree.size_of("e") == 9


def test_touching_a_leaf_again_saves_it_from_eviction() -> None:
    tree = PrefixTree(max_nodes=3, ttl=60.0)
    tree.insert("aaa", "e", now=1.0)
    tree.insert("bbb", "e", now=2.0)
    tree.insert("ccc", "e", now=3.0)
    tree.insert("aaa", "f", now=3.5)
    tree.insert("ddd", "e", now=4.0)
    assert tree.match("aaa", now=4.0).longest == 3
    assert tree.match("bbb", now=4.0).longest == 0


def test_eviction_takes_leaves_before_their_parents() -> None:
    tree = PrefixTree(max_nodes=3, ttl=60.0)
    tree.insert("abcdef", "e", now=1.0)
    tree.insert("abcxyz", "e", now=2.0)  # abc -> {def, xyz}
    tree.insert("q", "e", now=3.0)
    assert len(tree) == 3
    assert tree.match("abcdef", now=3.0).longest == 3  # "def" went; its parent stayed
    assert tree.match("abcxyz", now=3.0).longest == 6


def test_a_parent_left_childless_becomes_an_eviction_candidate() -> None:
    tree = PrefixTree(max_nodes=2, ttl=60.0)
    tree.insert("abc", "e", now=1.0)
    tree.insert("abd", "e", now=2.0)  # ab -> {c, d}; "c" is evicted
    tree.insert("x", "e", now=3.0)  # "d" is evicted, leaving "ab" a leaf touched at 2
    tree.insert("y", "e", now=4.0)
    assert tree.match("abd", now=4.0).longest == 0
    assert tree.match("x", now=4.0).longest == 1


def test_the_prompt_just_inserted_survives_eviction_at_equal_times() -> None:
    tree = PrefixTree(max_nodes=2, ttl=60.0)
    tree.insert("abc", "e", now=1.0)
    tree.insert("xyz", "e", now=1.0)
    tree.insert("abc", "e", now=5.0)  # both leaves now as recent as the next insert
    tree.insert("xyz", "e", now=5.0)
    tree.insert("q", "e", now=5.0)
    assert len(tree) == 2
    assert tree.match("q", now=5.0).longest == 1


def test_a_path_longer_than_the_bound_is_cut_to_fit() -> None:
    tree = PrefixTree(max_nodes=1, ttl=60.0)
    tree.insert("abc", "e", now=1.0)
    tree.insert("abd", "e", now=2.0)  # ab -> {c, d}: three nodes, one allowed
    assert len(tree) == 1
    assert tree.match("abd", now=2.0) == PrefixMatch(2, {"e": 2})
    assert tree.size_of("e") == 2


def test_repeated_inserts_do_not_grow_the_eviction_heap() -> None:
    tree = PrefixTree(max_nodes=50, ttl=60.0)
    for i in range(5000):
        tree.insert(f"prompt {i % 7}", "e", now=float(i))
        tree.insert(f"other {i}", "f", now=float(i))
    assert len(tree) <= 50
    assert len(tree._heap) <= len(tree)  # a memory bound, so worth looking inside for


def test_a_walk_is_refused_once_the_tree_changed_shape() -> None:
    tree = PrefixTree(max_nodes=100, ttl=10.0)
    tree.insert("system prompt, question one", "a", now=1.0)
    walk = tree.walk("system prompt, question two")
    tree.insert("system prompt, question three", "b", now=2.0)  # splits the edge it walked
    with pytest.raises(RuntimeError, match="walk the text again"):
        walk.match(now=2.0)
    with pytest.raises(RuntimeError, match="walk the text again"):
        walk.insert("a", now=2.0)


def test_a_walk_outlives_inserts_that_only_renew_times() -> None:
    tree = PrefixTree(max_nodes=100, ttl=10.0)
    tree.insert("system prompt", "a", now=1.0)
    walk = tree.walk("system prompt")
    tree.insert("system prompt", "b", now=2.0)  # same path: no node added
    assert walk.match(now=3.0) == PrefixMatch(13, {"a": 13, "b": 13})


@pytest.mark.parametrize(("max_nodes", "ttl"), [(0, 1.0), (-1, 1.0), (1, 0.0), (1, -1.0), (1, float("nan"))])
def test_bad_bounds_are_refused(max_nodes: int, ttl: float) -> None:
    with pytest.raises(ValueError, match="PrefixTree"):
        PrefixTree(max_nodes=max_nodes, ttl=ttl)


# --- properties -------------------------------------------------------------------------

_op = st.one_of(
    st.tuples(st.just("insert"), _texts, _endpoints, st.floats(0, 3)),
    st.tuples(st.just("remove"), _endpoints),
    st.tuples(st.just("prune"), st.floats(0, 3)),
    st.tuples(st.just("match"), _texts, st.floats(0, 3)),
    # As the router does: one walk answers the match, then records the insert.
    st.tuples(st.just("route"), _texts, _endpoints, st.floats(0, 3)),
)


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(_op, max_size=40), steady=st.booleans())
def test_with_room_the_tree_answers_exactly_like_a_list_of_every_insert(
    ops: list[tuple[Any, ...]], steady: bool
) -> None:
    # With `steady` false the clock jumps about: reports can arrive out of order, and the
    # tree must still keep each endpoint's newest time.
    ttl = 4.0
    tree = PrefixTree(max_nodes=10_000, ttl=ttl)
    ref = _Reference(ttl)
    now = 0.0

    def tick(step: float) -> float:
        return now + step if steady else step * 4

    for op in ops:
        if op[0] == "insert":
            now = tick(op[3])
            tree.insert(op[1], op[2], now)
            if op[1]:
                ref.inserts.append((op[1], op[2], now))
        elif op[0] == "remove":
            tree.remove_endpoint(op[1])
            ref.inserts = [i for i in ref.inserts if i[1] != op[1]]
        elif op[0] == "prune":
            now = tick(op[1])
            tree.prune(now)
            ref.inserts = [i for i in ref.inserts if i[2] > now - ttl]
        elif op[0] == "route":
            now = tick(op[3])
            walk = tree.walk(op[1])
            expected = ref.by_endpoint(op[1], now)
            assert walk.match(now) == PrefixMatch(max(expected.values(), default=0), expected)
            walk.insert(op[2], now)
            if op[1]:
                ref.inserts.append((op[1], op[2], now))
        else:
            now = tick(op[2])
            expected = ref.by_endpoint(op[1], now)
            assert tree.match(op[1], now) == PrefixMatch(max(expected.values(), default=0), expected)
        for endpoint in ("e1", "e2", "e3"):
            assert tree.size_of(endpoint) == ref.size_of(endpoint)


@settings(max_examples=200, deadline=None)
@given(max_nodes=st.integers(1, 8), ops=st.lists(_op, max_size=40), last=_texts, endpoint=_endpoints)
def test_the_bound_always_holds_and_a_fitting_prompt_always_matches_in_full(
    max_nodes: int,
    ops: list[tuple[Any, ...]],
    last: str,
    endpoint: str,
) -> None:
    ttl = 4.0
    tree = PrefixTree(max_nodes=max_nodes, ttl=ttl)
    ref = _Reference(ttl)
    now = 0.0
    for op in ops:
        if op[0] in ("insert", "route"):
            now += op[3]
            tree.insert(op[1], op[2], now)
            ref.inserts.append((op[1], op[2], now))
        elif op[0] == "remove":
            tree.remove_endpoint(op[1])
            ref.inserts = [i for i in ref.inserts if i[1] != op[1]]
        elif op[0] == "prune":
            now += op[1]
            tree.prune(now)
        else:
            now += op[2]
            found = tree.match(op[1], now)
            known = ref.by_endpoint(op[1], now)
            assert found.longest <= len(op[1])
            assert found.longest == max(found.by_endpoint.values(), default=0)
            for e, length in found.by_endpoint.items():
                assert 0 < length <= known[e]  # it forgets, it never invents
        assert len(tree) <= max_nodes
        assert len(tree._heap) <= len(tree)
        for e in ("e1", "e2", "e3"):
            assert tree.size_of(e) <= ref.size_of(e)
    tree.insert(last, endpoint, now)
    assert len(tree) <= max_nodes
    if len(last) <= max_nodes:  # each node holds at least one character of the path
        assert tree.match(last, now).by_endpoint.get(endpoint, 0) == len(last)

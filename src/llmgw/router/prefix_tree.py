"""An approximate record of which replica has which prompt prefix in its KV cache.

Engines with prefix caching (vLLM, SGLang) answer a prompt faster when its beginning is
still cached from an earlier request. The gateway cannot see those caches, so, like
SGLang's and vllm-router's `cache_aware` policy, it remembers the prompt text it sent to
each replica and assumes a replica still holds what it served less than `ttl` seconds
ago. Text rather than tokens: no tokenizer on the request path, and a shared prefix of
characters is a shared prefix of tokens up to the last token or so.

The record is one compressed radix tree shared by all replicas. Each edge is labelled by
a substring; each node remembers, per endpoint, the last time an insert for that
endpoint went through it. Because an insert touches its whole path (keeping the larger
time), an endpoint present at a node is present at every ancestor with a time at least
as recent. So along a prompt's path the endpoints alive at a node only shrink, and the
deepest node where an endpoint is alive gives its longest match.

Memory is bounded by `max_nodes`. Past the bound, the least recently touched leaves are
evicted: leaves sit in a heap keyed by their time when pushed, and a popped leaf touched
since is pushed again with its new time instead of being evicted (lazy invalidation),
so an insert costs O(path + log n) amortised and never scans the tree. Each node has at
most one heap entry, so the heap is no larger than the tree.

Strings are compared with `str.startswith` at an offset, in C; a common prefix is only
searched for (by bisection over slices) where an edge and the prompt part ways.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import NamedTuple


class PrefixMatch(NamedTuple):
    """What the tree knows about a prompt.

    `longest` is the longest prefix, in characters, that some endpoint served within the
    ttl; `by_endpoint` gives each such endpoint its own longest live prefix. Endpoints
    with nothing live in common with the prompt are absent (read them as 0).
    """

    longest: int
    by_endpoint: dict[str, int]


class _Node:
    """One edge of the tree and the node it leads to."""

    __slots__ = ("children", "in_heap", "label", "last", "oldest", "parent", "touched")

    def __init__(
        self, label: str, parent: _Node | None, touched: dict[str, float], last: float, oldest: float
    ) -> None:
        self.label = label
        # None once the node has left the tree; the root also has none, but is never in the heap.
        self.parent = parent
        # Keyed by the first character of the child's label, unique among siblings.
        self.children: dict[str, _Node] = {}
        self.touched = touched
        self.last = last  # max(touched.values()): the node's age for eviction
        # At most min(touched.values()); while it is live, every entry is, and a match
        # copies the endpoints in one C call instead of testing each.
        self.oldest = oldest
        self.in_heap = False


def _common_prefix(label: str, text: str, pos: int) -> int:
    """Length of the common prefix of `label` and `text[pos:]`, for a label that is known
    not to be a prefix of `text[pos:]` and to agree with it on the first character."""
    rest = len(text) - pos
    if rest < len(label):
        if text.startswith(label[:rest], pos):
            return rest  # the text ends inside the edge
        hi = rest - 1
    else:
        hi = len(label) - 1
    lo = 1  # label[:lo] is known to match; label[: hi + 1] is known not to
    while lo < hi:
        mid = (lo + hi + 1) // 2
        # Only the undecided window is sliced, so the copies add up to O(len(label)).
        if text.startswith(label[lo:mid], pos + lo):
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixTree:
    """Prompt prefixes recently sent to each endpoint, in at most `max_nodes` nodes.

    `ttl` is in seconds: an endpoint's entry older than that no longer counts as cached.
    Every method that needs the time takes `now`, monotonic seconds.
    """

    def __init__(self, max_nodes: int, ttl: float) -> None:
        if max_nodes < 1:
            raise ValueError(f"PrefixTree max_nodes must be at least 1, got {max_nodes}")
        if not ttl > 0:
            raise ValueError(f"PrefixTree ttl must be a positive number of seconds, got {ttl}")
        self._max_nodes = max_nodes
        self._ttl = ttl
        self._root = _Node("", None, {}, 0.0, 0.0)
        self._count = 0  # nodes other than the root
        self._chars: dict[str, int] = {}  # characters held per endpoint
        self._heap: list[tuple[float, int, _Node]] = []
        self._seq = 0  # heap tie-breaker, so nodes are never compared
        self._shape = 0  # bumped whenever a node is added, split or removed: walks expire

    def __len__(self) -> int:
        """Number of nodes, not counting the empty root."""
        return self._count

    def size_of(self, endpoint: str) -> int:
        """Characters held for `endpoint`, expired entries included until they are pruned
        or evicted (the tie-breaker vllm-router uses: the smallest cache is the emptiest)."""
        return self._chars.get(endpoint, 0)

    def walk(self, text: str) -> PrefixWalk:
        """Follows `text` down the tree once; the walk then answers `match` and does
        `insert` without comparing the text again. It holds until the tree next changes
        shape (a node added, split or removed): the router matches and inserts a prompt
        within one synchronous step, so one walk serves both."""
        path: list[tuple[int, _Node]] = []
        node = self._root
        pos = 0
        size = len(text)
        while pos < size:
            child = node.children.get(text[pos])
            if child is None:
                break
            label = child.label
            if not text.startswith(label, pos):
                return PrefixWalk(self, text, path, child, _common_prefix(label, text, pos))
            pos += len(label)
            path.append((pos, child))
            node = child
        return PrefixWalk(self, text, path, None, 0)

    def match(self, text: str, now: float) -> PrefixMatch:
        """The longest live prefix of `text`, overall and per endpoint."""
        return self.walk(text).match(now)

    def insert(self, text: str, endpoint: str, now: float) -> None:
        """Record that `endpoint` was just sent a prompt beginning with `text`."""
        self.walk(text).insert(endpoint, now)

    def _grow(self, parent: _Node, label: str, endpoint: str, now: float) -> _Node:
        """A new leaf under `parent`, held by `endpoint` alone."""
        leaf = _Node(label, parent, {endpoint: now}, now, now)
        parent.children[label[0]] = leaf
        self._count += 1
        self._shape += 1
        self._push(leaf)
        return leaf

    def _inserted(self, endpoint: str, added: int, end: _Node) -> None:
        """What follows an insert that ended at `end` and gave `endpoint` `added` more
        characters: its size, and eviction past the bound."""
        if added:
            self._chars[endpoint] = self._chars.get(endpoint, 0) + added
        if self._count > self._max_nodes:
            self._evict(protect=end)

    def remove_endpoint(self, endpoint: str) -> None:
        """Forget everything recorded for `endpoint` (a replica withdrawn). O(nodes)."""

        def strip(touched: dict[str, float]) -> list[str]:
            return [endpoint] if touched.pop(endpoint, None) is not None else []

        self._sweep(strip)

    def prune(self, now: float) -> int:
        """Drop every entry older than the ttl, and the nodes left with none; returns the
        number of nodes removed. O(nodes): for a periodic sweep, not the request path."""
        cutoff = now - self._ttl

        def strip(touched: dict[str, float]) -> list[str]:
            expired = [endpoint for endpoint, t in touched.items() if t <= cutoff]
            for endpoint in expired:
                del touched[endpoint]
            return expired

        before = self._count
        self._sweep(strip)
        return before - self._count

    def _split(self, child: _Node, at: int) -> _Node:
        """Cut `child`'s edge after `at` characters; returns the new upper node, which
        starts with the same endpoints and times as `child` (every insert through
        `child` went through it)."""
        parent = child.parent
        assert parent is not None
        label = child.label
        upper = _Node(label[:at], parent, dict(child.touched), child.last, child.oldest)
        parent.children[label[0]] = upper
        child.label = label[at:]
        child.parent = upper
        upper.children[child.label[0]] = child
        self._count += 1
        self._shape += 1
        return upper

    def _push(self, node: _Node) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (node.last, self._seq, node))
        node.in_heap = True

    def _evict(self, protect: _Node) -> None:
        """Remove least recently touched leaves until the bound holds. The end of the
        prompt just inserted is kept while anything else can go, so a prompt fits when
        its own path does."""
        heap = self._heap
        held: tuple[float, int, _Node] | None = None
        while self._count > self._max_nodes:
            if not heap:
                if held is None:
                    break
                heapq.heappush(heap, held)
                held = None
                protect = self._root  # nothing else left: the new path gives way too
                continue
            entry = heapq.heappop(heap)
            last, _, node = entry
            node.in_heap = False
            if node.parent is None or node.children:
                continue  # gone, or no longer a leaf; re-pushed if it becomes one again
            if last < node.last:
                self._push(node)  # touched since it was pushed
                continue
            if node is protect:
                held = entry
                node.in_heap = True
                continue
            self._detach_leaf(node)
        if held is not None:
            heapq.heappush(heap, held)

    def _detach_leaf(self, node: _Node) -> None:
        parent = node.parent
        assert parent is not None
        del parent.children[node.label[0]]
        node.parent = None
        self._count -= 1
        self._shape += 1
        for endpoint in node.touched:
            self._release(endpoint, len(node.label))
        if parent is not self._root and not parent.children and not parent.in_heap:
            self._push(parent)

    def _release(self, endpoint: str, size: int) -> None:
        left = self._chars[endpoint] - size
        if left:
            self._chars[endpoint] = left
        else:
            del self._chars[endpoint]  # so withdrawn endpoints leave no key behind

    def _sweep(self, strip: Callable[[dict[str, float]], list[str]]) -> None:
        """Apply `strip` to every node's entries (it returns the endpoints it removed),
        cut off the nodes left empty, and rebuild the heap from the remaining leaves.

        A node left empty has an empty subtree once stripped too (the endpoints below a
        node are a subset of its own, with older times), so it is cut off whole.
        """
        leaves: list[_Node] = []
        stack = [self._root]
        while stack:
            node = stack.pop()
            for key, child in list(node.children.items()):
                removed = strip(child.touched)
                for endpoint in removed:
                    self._release(endpoint, len(child.label))
                if not child.touched:
                    del node.children[key]
                    self._cut(child)
                    continue
                if removed:
                    child.last = max(child.touched.values())
                    child.oldest = min(child.touched.values())
                stack.append(child)
            if node is not self._root and not node.children:
                leaves.append(node)
        for _, _, stale in self._heap:
            stale.in_heap = False
        self._heap = []
        for leaf in leaves:
            self._push(leaf)

    def _cut(self, top: _Node) -> None:
        """Detach the subtree under `top`, whose own entries are already released."""
        top.parent = None
        self._count -= 1
        self._shape += 1
        stack = list(top.children.values())
        while stack:
            node = stack.pop()
            node.parent = None
            self._count -= 1
            for endpoint in node.touched:
                self._release(endpoint, len(node.label))
            stack.extend(node.children.values())


class PrefixWalk:
    """A prompt followed down the tree: the whole edges it matched, and the edge where
    it parted from the tree, if it did inside one. `PrefixTree.walk` makes it."""

    __slots__ = ("_common", "_parted", "_path", "_shape", "_text", "_tree")

    def __init__(
        self, tree: PrefixTree, text: str, path: list[tuple[int, _Node]], parted: _Node | None, common: int
    ) -> None:
        self._tree = tree
        self._shape = tree._shape
        self._text = text
        self._path = path  # (characters matched through the node, node), root first
        self._parted = parted  # the edge the text leaves partway, `common` characters in
        self._common = common

    def match(self, now: float) -> PrefixMatch:
        """The longest live prefix of the text, overall and per endpoint: the walk cut
        at the first node nobody touched within the ttl (nothing below it is younger)."""
        self._check()
        cutoff = now - self._tree._ttl
        path = self._path
        live = len(path)
        for i, (_, node) in enumerate(path):
            if node.last <= cutoff:
                live = i
                break
        if live < len(path):
            path = path[:live]
        else:
            parted = self._parted
            if parted is not None and parted.last > cutoff:
                path = [*path, ((path[-1][0] if path else 0) + self._common, parted)]
        if not path:
            return PrefixMatch(0, {})
        return PrefixMatch(path[-1][0], _endpoints_along(path, now, cutoff))

    def insert(self, endpoint: str, now: float) -> None:
        """Records that `endpoint` was just sent the text. The walk is spent after it."""
        self._check()
        tree = self._tree
        added = 0  # characters newly held for this endpoint
        for _, through in self._path:
            added += _touch(through, endpoint, now)
        pos, node = self._path[-1] if self._path else (0, tree._root)
        parted = self._parted
        if parted is not None:
            node = tree._split(parted, self._common)
            pos += self._common
            added += _touch(node, endpoint, now)
        text = self._text
        if pos < len(text):
            node = tree._grow(node, text[pos:], endpoint, now)
            added += len(text) - pos
        tree._inserted(endpoint, added, node)

    def _check(self) -> None:
        if self._shape != self._tree._shape:
            raise RuntimeError("a PrefixWalk is used after the tree changed shape; walk the text again")


def _touch(node: _Node, endpoint: str, now: float) -> int:
    """Marks `node` as just used by `endpoint`; returns the characters newly held by it."""
    entries = node.touched
    touched = entries.get(endpoint)
    added = 0
    if touched is None:
        added = len(node.label)
        entries[endpoint] = now
        if now < node.oldest:  # noqa: PLR1730 - a comparison is cheaper than calling min()
            node.oldest = now
    elif now > touched:
        entries[endpoint] = now
    if now > node.last:  # noqa: PLR1730 - a comparison is cheaper than calling max() per node
        node.last = now
    return added


def _endpoints_along(path: list[tuple[int, _Node]], now: float, cutoff: float) -> dict[str, int]:
    """Each endpoint's deepest live node on `path`, read from the bottom up.

    Going up, a node holds every endpoint live below it and perhaps more; one whose
    entries number no more than those already found adds nothing and is passed over
    (long chains of one conversation's turns, all held by one replica, cost a
    comparison each).
    """
    found: dict[str, int] = {}
    for end, node in reversed(path):
        touched = node.touched
        if len(touched) == len(found):
            continue
        if node.oldest > cutoff:
            # All live: copy them in C; what was found deeper keeps its longer match.
            merged = dict.fromkeys(touched, end)
            if found:
                merged.update(found)
            found = merged
            continue
        oldest = now
        for endpoint, at in touched.items():
            if at > cutoff and endpoint not in found:
                found[endpoint] = end
            if at < oldest:  # noqa: PLR1730 - per entry on the hot path; no call
                oldest = at
        node.oldest = oldest  # tightened, so the next match may take the fast path
    return found

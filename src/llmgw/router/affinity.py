"""Session affinity: which endpoint a conversation was last sent to.

A session that keeps going to the same replica finds its whole history in that
replica's KV cache. The table maps a session id to the endpoint that last served it and
when. It is bounded: past `max_sessions` the least recently used session is dropped,
and an entry unused for `ttl` seconds is a miss (the replica has likely evicted that
cache by then).

Sessions are held by `hash()` of their id, not the id: the id is whatever the client
sent in a header (up to the head's size limit), and keeping it would let a client make
each entry cost kilobytes. Python's string hash is keyed per process (SipHash), so ids
that collide cannot be chosen from outside, and a chance collision (64 bits) would
only send two conversations to one replica.

Only `set` counts as a use: the router records where each request actually went, kept
or moved, so a lookup alone never refreshes a session. Every time is `now`, monotonic
seconds, passed in.
"""

from __future__ import annotations

from collections import OrderedDict


class SessionAffinity:
    """Session id → endpoint, least recently used first."""

    __slots__ = ("_entries", "_max_sessions", "_ttl")

    def __init__(self, max_sessions: int, ttl: float) -> None:
        if max_sessions < 1:
            raise ValueError(f"SessionAffinity max_sessions must be at least 1, got {max_sessions}")
        if not ttl > 0:
            raise ValueError(f"SessionAffinity ttl must be a positive number of seconds, got {ttl}")
        self._max_sessions = max_sessions
        self._ttl = ttl
        # Ordered by last use, oldest first; keys are the ids' hash(), values are
        # (endpoint, last use).
        self._entries: OrderedDict[int, tuple[str, float]] = OrderedDict()

    def __len__(self) -> int:
        """Sessions held, expired ones included until they are dropped."""
        return len(self._entries)

    def get(self, session: str, now: float) -> str | None:
        """The endpoint `session` was last sent to, if that was less than `ttl` ago."""
        key = hash(session)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] <= now - self._ttl:
            del self._entries[key]
            return None
        return entry[0]

    def set(self, session: str, endpoint: str, now: float) -> None:
        """Record that `session` was just sent to `endpoint`."""
        entries = self._entries
        key = hash(session)
        entries[key] = (endpoint, now)
        entries.move_to_end(key)
        while len(entries) > self._max_sessions:
            entries.popitem(last=False)
        # Expired entries gather at the old end; drop them while they are cheap to find.
        cutoff = now - self._ttl
        while entries:
            oldest = next(iter(entries.values()))
            if oldest[1] > cutoff:
                break
            entries.popitem(last=False)

    def forget_endpoint(self, endpoint: str) -> None:
        """Drop every session held by `endpoint` (a replica withdrawn). O(sessions)."""
        for session in [s for s, (e, _) in self._entries.items() if e == endpoint]:
            del self._entries[session]

"""Which side of a canary one request goes to: a pure function, on the request path.

A request without a session is placed by its sequence number among the model's
requests: the `n`th goes to the candidate when `n × percent / 100` reaches a new whole
number, so exactly `percent` of every hundred consecutive requests go there, evenly
spread (never drawn at random: a test of ten thousand requests sees the share it asked
for, and two gateways each see it of their own traffic).

A request with a session (`router.session_header`, `x-session-id` by default) is
placed by a stable hash of the session id instead, so every turn of one conversation
lands on the same side, whichever gateway serves it and after a restart: CRC-32 of the
id's bytes, its remainder by 10,000 compared with `percent × 100`. CRC-32 is C code in
the standard library and costs a fraction of a microsecond for an id's length; the
split is over hashes of distinct ids, so it is even as the ids are many.
"""

from __future__ import annotations

from zlib import crc32

_BUCKETS = 10_000
_PER_POINT = _BUCKETS // 100


def to_candidate(percent: int, sequence: int, session: str | None) -> bool:
    """Whether the request goes to the candidate: by `session`'s hash when there is one,
    else by `sequence` (the model's request count, from 1)."""
    if percent <= 0:
        return False
    if percent >= 100:
        return True
    if session:
        return crc32(session.encode()) % _BUCKETS < percent * _PER_POINT
    return (sequence * percent) // 100 > ((sequence - 1) * percent) // 100

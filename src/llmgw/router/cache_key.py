"""Which requests the response cache may answer, and the key it keeps them under.

Only an answer that would come out the same again is worth keeping: a request with
`temperature: 0`, or one that names a `seed`. Anything else samples, and a cached
answer would hide that from the client.

The key is the project, the route, the model, the answer's shape and the body's
canonical form (keys sorted, no whitespace), as bytes. Not a digest of them: a
cryptographic hash of a few KB costs more than the 5 µs a miss may add
(bench/results/cache-micro.md), while a dictionary hashes bytes far faster and compares
them whole, so two requests can never share an entry by collision. The key's bytes
count towards its entry's size. The body counts whole except the
fields that never change what the model writes (`user`, `metadata`, `stream`,
`stream_options`, `store`, ...): leaving fields out by a deny list rather than taking
them in by an allow list means a field this version does not know (a new sampling
parameter) keeps two requests apart rather than handing one the other's answer.

The shape is whether the answer is streamed and whether the stream ends with a usage
event: a hit replays the bytes the first client was sent, so a client that asked for
a stream gets a stream of the same events, and one that asked for JSON gets JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

# Fields that change nothing in the answer: who asked, how it is delivered, what is
# recorded about it. `model` is keyed apart, as the gateway's resolved name.
IGNORED_FIELDS: frozenset[str] = frozenset(
    {"model", "user", "metadata", "stream", "stream_options", "store", "service_tier", "priority"}
)


def cacheable(body: Mapping[str, Any]) -> bool:
    """True for a request whose answer repeats: temperature 0, or a seed named."""
    seed = body.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        return True
    temperature = body.get("temperature")
    return isinstance(temperature, int | float) and not isinstance(temperature, bool) and temperature == 0


def cache_key(
    project: str, route: bytes, model: str, stream: bool, usage: bool, body: Mapping[str, Any]
) -> bytes:
    """The key of a cacheable request's answer: each name length-prefixed, so no two
    different requests make the same bytes."""
    kept = {name: value for name, value in body.items() if name not in IGNORED_FIELDS}
    canonical = orjson.dumps(kept, option=orjson.OPT_SORT_KEYS)
    names = orjson.dumps((project, route.decode(), model, stream, usage))
    return len(names).to_bytes(4, "big") + names + canonical

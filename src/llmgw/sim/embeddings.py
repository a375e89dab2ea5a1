"""Deterministic embedding vectors: the same tokens always give the same unit vector.

The values mean nothing; what tests and routers rely on is that the shape, the count,
the usage and the bytes are stable, and that different inputs give different vectors.
The `base64` encoding is little-endian float32, which is what the openai client asks
for by default and decodes.
"""

from __future__ import annotations

import base64
import math
import random
import sys
import zlib
from array import array
from collections.abc import Sequence


def embedding(token_ids: Sequence[int], dimensions: int, seed: int) -> list[float]:
    """A unit vector of `dimensions` floats, a pure function of the tokens and the seed."""
    key = zlib.crc32(array("q", token_ids).tobytes(), seed & 0xFFFFFFFF)
    rng = random.Random(key)
    vector = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def encode_base64(vector: Sequence[float]) -> str:
    """The vector as base64 of little-endian float32, OpenAI's `encoding_format=base64`."""
    packed = array("f", vector)
    if sys.byteorder == "big":  # pragma: no cover - the wire format is little-endian
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode()

"""vLLM's prefix-cache block hashes, computed on the router's side.

vLLM names each full block of `block_size` tokens by a hash chained over the block
before it (vllm/v1/core/kv_cache_utils.py, `hash_block_tokens`):

    hash_function((parent_block_hash or NONE_HASH, tuple(block_token_ids), extra_keys))

With `--prefix-caching-hash-algo sha256_cbor` the hash function is
(vllm/utils/hashing.py, `sha256_cbor`) `sha256(cbor2.dumps(obj, canonical=True))`,
and the chain's root is seeded by `init_none_hash`: `NONE_HASH = sha256_cbor(
os.environ["PYTHONHASHSEED"])` (the seed as a *string*), or 32 random bytes when the
variable is unset -- in which case no one outside the engine can reproduce its hashes,
and the replicas must be started with the same PYTHONHASHSEED for this to work.

On the event wire a hash is either the 32 bytes or, with
VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES, `int.from_bytes(h, "big") & (2**64 - 1)`
(`maybe_convert_block_hash`); `block_key` reduces both to that 64-bit integer, so the
index is keyed the same whichever form a replica sends.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import cbor2

_MASK64 = (1 << 64) - 1


def sha256_cbor(obj: object) -> bytes:
    """vLLM's `sha256_cbor`: SHA-256 of the canonical CBOR encoding."""
    return hashlib.sha256(cbor2.dumps(obj, canonical=True)).digest()


def none_hash(seed: str) -> bytes:
    """The chain's root for a given PYTHONHASHSEED value."""
    return sha256_cbor(seed)


def block_key(h: bytes | int) -> int:
    """A block hash as sent on the wire (bytes or int form) as the index's 64-bit key."""
    if isinstance(h, bytes):
        return int.from_bytes(h, "big") & _MASK64
    return h & _MASK64


def hash_blocks(
    token_ids: Sequence[int], block_size: int, root: bytes, max_blocks: int, extra: object = None
) -> list[bytes]:
    """The chained hashes of the prompt's full blocks, at most `max_blocks` of them.

    `extra` is vLLM's per-block extra keys (LoRA name, cache salt, multimodal ids);
    None for a plain text prompt on the base model, which is all this router asks about.
    """
    out: list[bytes] = []
    parent = root
    full = min(len(token_ids) // block_size, max_blocks)
    for b in range(full):
        start = b * block_size
        parent = sha256_cbor((parent, tuple(token_ids[start : start + block_size]), extra))
        out.append(parent)
    return out

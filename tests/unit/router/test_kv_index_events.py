"""The KV index, vLLM's block hashing and the event wire format."""

from __future__ import annotations

import hashlib

import cbor2
import msgpack
import pytest

from llmgw.protocol.kv_events import (
    Batch,
    Cleared,
    EventDecodeError,
    Removed,
    Stored,
    decode_message,
    encode_cleared,
    encode_message,
    encode_removed,
    encode_stored,
)
from llmgw.protocol.kv_hash import block_key, hash_blocks, none_hash, sha256_cbor
from llmgw.router.kv_index import KVIndex


def _batch(seq: int, *events: Stored | Removed | Cleared) -> Batch:
    return Batch(seq=seq, ts=0.0, events=events)


# --- hashing -----------------------------------------------------------------


def test_sha256_cbor_is_sha256_of_canonical_cbor() -> None:
    obj = (b"\x01" * 32, (1, 2, 3), None)
    assert sha256_cbor(obj) == hashlib.sha256(cbor2.dumps(obj, canonical=True)).digest()


def test_none_hash_hashes_the_seed_string() -> None:
    # vLLM: NONE_HASH = hash_fn(os.getenv("PYTHONHASHSEED")), the seed as a str.
    assert none_hash("0") == hashlib.sha256(cbor2.dumps("0", canonical=True)).digest()
    assert none_hash("0") != none_hash("1")


def test_hash_blocks_chains_parent_tokens_extra() -> None:
    root = none_hash("0")
    tokens = list(range(40))
    hashes = hash_blocks(tokens, 16, root, max_blocks=100)
    assert len(hashes) == 2  # the 8-token tail is not a full block
    first = sha256_cbor((root, tuple(range(16)), None))
    assert hashes[0] == first
    assert hashes[1] == sha256_cbor((first, tuple(range(16, 32)), None))


def test_hash_blocks_stops_at_max_blocks() -> None:
    assert len(hash_blocks(list(range(160)), 16, none_hash("0"), max_blocks=3)) == 3


def test_block_key_reads_bytes_and_int_forms_alike() -> None:
    h = sha256_cbor("x")
    # vLLM's int form: int.from_bytes(h, "big") & (2**64 - 1).
    as_int = int.from_bytes(h, "big") & ((1 << 64) - 1)
    assert block_key(h) == block_key(as_int) == as_int


# --- wire format ---------------------------------------------------------------


def test_array_like_batch_round_trips() -> None:
    a, b = sha256_cbor("a"), sha256_cbor("b")
    frames = encode_message(
        7, 1.5, [encode_stored([a, b], None, list(range(32)), 16), encode_removed([a]), encode_cleared()]
    )
    batch = decode_message(frames)
    assert batch.seq == 7
    assert batch.ts == 1.5
    assert batch.events == (Stored((block_key(a), block_key(b)), None), Removed((block_key(a),)), Cleared())


def test_map_layout_batch_is_read_too() -> None:
    payload = msgpack.packb(
        {
            "ts": 2.0,
            "events": [
                {
                    "type": "BlockStored",
                    "block_hashes": [5, 6],
                    "parent_block_hash": None,
                    "token_ids": [],
                    "block_size": 16,
                    "lora_id": 3,
                    "medium": "GPU",
                    "lora_name": None,
                },
                {"type": "BlockRemoved", "block_hashes": [5], "medium": "GPU"},
            ],
        }
    )
    batch = decode_message([b"kv", (0).to_bytes(8, "big"), payload])
    assert batch.events == (Stored((5, 6), 3), Removed((5,)))


@pytest.mark.parametrize(
    "frames",
    [
        [b"", b"\x00" * 8],
        [b"", b"\x00" * 4, b"\x90"],
        [b"", b"\x00" * 8, b"\xc1"],
        [b"", b"\x00" * 8, msgpack.packb([0.0, [["Nope"]]])],
        [b"", b"\x00" * 8, msgpack.packb(3)],
    ],
)
def test_malformed_messages_are_refused(frames: list[bytes]) -> None:
    with pytest.raises(EventDecodeError):
        decode_message(frames)


# --- index -----------------------------------------------------------------------


def test_leading_counts_unbroken_runs_per_replica() -> None:
    idx = KVIndex()
    idx.apply("r1", _batch(0, Stored((1, 2, 3, 4), None)))
    idx.apply("r2", _batch(0, Stored((1, 2), None)))
    assert idx.leading([1, 2, 3, 4, 5]) == {"r1": 4, "r2": 2}
    assert idx.leading([9, 1, 2]) == {}
    assert idx.leading([]) == {}


def test_removed_and_cleared_blocks_stop_counting() -> None:
    idx = KVIndex()
    idx.apply("r1", _batch(0, Stored((1, 2, 3), None)))
    idx.apply("r1", _batch(1, Removed((2,))))
    assert idx.leading([1, 2, 3]) == {"r1": 1}
    idx.apply("r1", _batch(2, Cleared()))
    assert idx.leading([1]) == {}
    assert len(idx) == 0


def test_a_sequence_gap_drops_what_came_before() -> None:
    idx = KVIndex()
    idx.apply("r1", _batch(0, Stored((1, 2), None)))
    assert idx.apply("r1", _batch(2, Stored((7,), None))) is False
    assert idx.leading([1]) == {}
    assert idx.leading([7]) == {"r1": 1}
    assert idx.resyncs == 1


def test_a_restart_counting_from_zero_drops_what_came_before() -> None:
    idx = KVIndex()
    idx.apply("r1", _batch(0, Stored((1,), None)))
    idx.apply("r1", _batch(1, Stored((2,), None)))
    assert idx.apply("r1", _batch(0, Stored((3,), None))) is False
    assert idx.leading([1]) == {}
    assert idx.leading([3]) == {"r1": 1}


def test_other_replicas_are_untouched_by_a_resync() -> None:
    idx = KVIndex()
    idx.apply("r1", _batch(0, Stored((1,), None)))
    idx.apply("r2", _batch(0, Stored((1,), None)))
    idx.apply("r1", _batch(5))
    assert idx.leading([1]) == {"r2": 1}


def test_memory_is_bounded_per_replica_oldest_first() -> None:
    idx = KVIndex(max_blocks_per_replica=3)
    idx.apply("r1", _batch(0, Stored((1, 2, 3, 4, 5), None)))
    assert idx.blocks_of("r1") == 3
    assert len(idx) == 3
    assert idx.leading([3, 4, 5]) == {"r1": 3}
    assert idx.leading([1]) == {}


def test_adapter_blocks_are_not_indexed() -> None:
    idx = KVIndex()
    idx.apply("r1", _batch(0, Stored((1,), 2)))
    assert idx.leading([1]) == {}


def test_drop_forgets_the_replica_and_its_sequence() -> None:
    idx = KVIndex()
    idx.apply("r1", _batch(4, Stored((1,), None)))
    idx.drop("r1")
    assert idx.leading([1]) == {}
    assert idx.apply("r1", _batch(0, Stored((1,), None))) is True

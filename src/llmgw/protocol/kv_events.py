"""vLLM's KV-cache events on the wire: decoding for the router, encoding for the sim.

vLLM (vllm/distributed/kv_events.py, `ZmqEventPublisher._publisher_thread`) sends each
batch as a ZMQ multipart message `[topic, seq, payload]`: `seq` an 8-byte big-endian
counter from 0 that restarts with the engine, `payload` a msgpack `KVEventBatch`
(`ts`, `events`, optional `data_parallel_rank`). Events are msgspec structs tagged
with their class name: `BlockStored{block_hashes, parent_block_hash, token_ids,
block_size, lora_id, medium, lora_name, extra_keys, ...}`, `BlockRemoved{block_hashes,
medium, ...}`, `AllBlocksCleared{}`. Releases have used two layouts: `array_like=True`
structs (an event is `[tag, field, field, ...]`, a batch `[ts, events, rank]`) and plain
ones (an event is a map with its tag under "type"); both are read here. Fields this
router does not use are ignored, so later additions do not break it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from llmgw.protocol.kv_hash import block_key

# Field order of the array-like layout, after the tag.
_STORED_FIELDS = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id")
_REMOVED_FIELDS = ("block_hashes",)


class EventDecodeError(ValueError):
    """A message that is not a KV event batch."""


@dataclass(frozen=True, slots=True)
class Stored:
    """Blocks a replica now holds, as index keys, in chain order."""

    keys: tuple[int, ...]
    lora_id: int | None


@dataclass(frozen=True, slots=True)
class Removed:
    keys: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Cleared:
    pass


Event = Stored | Removed | Cleared


@dataclass(frozen=True, slots=True)
class Batch:
    seq: int
    ts: float
    events: tuple[Event, ...]


def decode_message(frames: Sequence[bytes]) -> Batch:
    """One `[topic, seq, payload]` multipart message as a batch of events."""
    if len(frames) != 3 or len(frames[1]) != 8:
        raise EventDecodeError("expected [topic, 8-byte seq, payload]")
    seq = int.from_bytes(frames[1], "big", signed=True)
    try:
        raw = msgpack.unpackb(frames[2], raw=False, strict_map_key=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise EventDecodeError(f"payload is not msgpack: {exc}") from exc
    if isinstance(raw, list) and len(raw) >= 2:
        ts, events = raw[0], raw[1]
    elif isinstance(raw, dict):
        ts, events = raw.get("ts", 0.0), raw.get("events")
    else:
        raise EventDecodeError("payload is not an event batch")
    if not isinstance(events, list):
        raise EventDecodeError("batch has no events list")
    return Batch(seq=seq, ts=float(ts), events=tuple(_event(e) for e in events))


def _fields(raw: Any, names: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    if isinstance(raw, list) and raw and isinstance(raw[0], str):
        return raw[0], dict(zip(names, raw[1:], strict=False))
    if isinstance(raw, dict) and isinstance(raw.get("type"), str):
        return raw["type"], raw
    raise EventDecodeError("event is neither a tagged array nor a tagged map")


def _keys(values: Any) -> tuple[int, ...]:
    if not isinstance(values, list):
        raise EventDecodeError("block_hashes is not a list")
    return tuple(block_key(v) for v in values if isinstance(v, bytes | int))


def _event(raw: Any) -> Event:
    tag = raw[0] if isinstance(raw, list) and raw else raw.get("type") if isinstance(raw, dict) else None
    if tag == "BlockStored":
        _, f = _fields(raw, _STORED_FIELDS)
        lora = f.get("lora_id")
        return Stored(keys=_keys(f.get("block_hashes")), lora_id=lora if isinstance(lora, int) else None)
    if tag == "BlockRemoved":
        _, f = _fields(raw, _REMOVED_FIELDS)
        return Removed(keys=_keys(f.get("block_hashes")))
    if tag == "AllBlocksCleared":
        return Cleared()
    raise EventDecodeError(f"unknown event {tag!r}")


def encode_stored(
    block_hashes: Sequence[bytes | int], parent: bytes | int | None, token_ids: Sequence[int], block_size: int
) -> list[Any]:
    """A BlockStored event in the array-like layout (what the sim publishes)."""
    return ["BlockStored", list(block_hashes), parent, list(token_ids), block_size, None, "GPU", None]


def encode_removed(block_hashes: Sequence[bytes | int]) -> list[Any]:
    return ["BlockRemoved", list(block_hashes), "GPU"]


def encode_cleared() -> list[Any]:
    return ["AllBlocksCleared"]


def encode_message(seq: int, ts: float, events: Sequence[list[Any]], topic: bytes = b"") -> list[bytes]:
    """The multipart frames vLLM's publisher sends for one batch."""
    payload = msgpack.packb([ts, list(events)], use_bin_type=True)
    return [topic, seq.to_bytes(8, "big"), payload]

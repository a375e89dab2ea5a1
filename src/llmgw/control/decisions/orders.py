"""From the control plane's decisions to the agent protocol's orders.

A replica's start is one `start_replica` per node it spans, each built from the catalog
profile resolved for its model (`Model.engine_profile`, as `ProfileSpec` on the wire),
the devices and cores placement chose on that node, and the key the engine will demand
of callers. Ports and reserved cores are left to the agent (it knows what is free on its machine), except a
multi-node replica's rendezvous port, which every rank must agree on before rank 0 has
started, so the control plane picks it.

The same replica always yields the same order: orders are idempotent on the agent's
side, so repeating one after a lost frame or a reconnect is safe only if it says the
same thing. Each order also carries the leader term that decided it, which the agent
fences on (docs/control-plane-ha.md).
"""

from __future__ import annotations

import hashlib
import hmac
import zlib
from datetime import timedelta
from urllib.parse import urlsplit

from llmgw.catalog import Model
from llmgw.control.decisions.replicas import Part, ReplicaRecord
from llmgw.protocol.messages import ProfileSpec, StartReplica, StopReplica

_KEY_CONTEXT = b"llmgw engine key v1\x00"


def engine_key(secret: bytes, replica_id: str) -> str:
    """The API key a replica's engine demands, derived from the cluster's secret so a
    restarted control plane knows the key of every replica it adopts; empty without a
    secret (the engine then answers anyone who reaches its port)."""
    if not secret:
        return ""
    return hmac.new(secret, _KEY_CONTEXT + replica_id.encode(), hashlib.sha256).hexdigest()


def rendezvous_port(replica_id: str, port_range: tuple[int, int]) -> int:
    """A multi-node replica's rendezvous port: in the upper half of the node's engine
    port range, where agents hand out HTTP ports last (they take the lowest free ones
    first), and fixed by the replica's id so a repeated order names the same one."""
    low, high = port_range
    upper = low + (high - low + 1) // 2
    span = high - upper + 1
    return upper + zlib.crc32(replica_id.encode()) % span


def master_address(record: ReplicaRecord) -> str:
    """The host rank 0 serves at, which the other ranks dial; empty until rank 0 has
    reported its address."""
    return urlsplit(record.url).hostname or ""


def start_order(
    model: Model,
    record: ReplicaRecord,
    part: Part,
    *,
    api_key: str,
    port_range: tuple[int, int],
    term: int = 0,
) -> StartReplica | None:
    """The order starting `part` of `record`, stamped with the leader `term` that decided
    it (0: no lease); None when the model has no such profile any more (the catalog
    changed since the decision)."""
    profile = model.engine_profile(record.profile)
    if profile is None:
        return None
    multi_node = len(record.parts) > 1
    return StartReplica(
        replica_id=record.id,
        model=model.name,
        profile=ProfileSpec.of(profile),
        gpus=part.assignment.devices,
        # Left to the agent, which reserves the lowest cores none of its replicas hold:
        # placement counts cores by number among those the agent may use, and only the
        # agent knows which processor ids those are (its inventory reports a count).
        cpu_cores=(),
        node_rank=part.rank,
        master_address=master_address(record) if multi_node and part.rank > 0 else "",
        dist_port=rendezvous_port(record.id, port_range) if multi_node else 0,
        context_length=model.context_length,
        embeddings=model.capabilities.embeddings,
        api_key=api_key,
        origin=model.origin,
        term=term,
    )


def stop_order(replica_id: str, drain: timedelta = timedelta(0), *, term: int = 0) -> StopReplica:
    """Stops a replica, or acknowledges one that ended so its agent forgets it; `term` as
    for `start_order`."""
    return StopReplica(replica_id=replica_id, drain=drain, term=term)

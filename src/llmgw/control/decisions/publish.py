"""What the control plane tells the router: the replicas requests may go to.

The router's `EndpointRegistry.publish` replaces the whole set, so every publication is
the static endpoints of the configuration plus each replica that is ready and not on
its way out. A replica is published only once its agent reported it ready (health
answered 200), and withdrawn as soon as the control plane decides to stop it, before
the stop order is sent: the gateway stops choosing it while the requests it already
has finish (`drained`).

Publishing is skipped when the set did not change, so a pass with nothing to do costs
the router nothing.

Only the leader knows the replicas first-hand (agents connect to it alone). A server
that follows publishes the set the leader wrote to the store instead
(`llmgw.control.tables.replica_table`), and when it becomes the leader keeps that set published
beside its own replicas until its agents have had time to come back, so taking over
withdraws nothing that still serves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import orjson

from llmgw.catalog import Catalog
from llmgw.config.endpoints import PRIORITY_ENGINES
from llmgw.control.decisions.replicas import ReplicaRecord
from llmgw.engines.llamacpp import adapter_ids
from llmgw.router.endpoints import Endpoint, EndpointRegistry, EndpointSpec


def routable(record: ReplicaRecord) -> bool:
    """Whether requests may go to the replica: ready, with an address, not being stopped."""
    return record.phase == "ready" and not record.stop_reason and bool(record.url)


SCHEDULING_LABEL = "scheduling_policy"
"""The label a replica started with `--scheduling-policy priority` is published with; a
follower, which knows replicas only from the store, reads the flag back from it."""
LORA_LABEL = "lora_ids"
"""The label a llama-server replica's adapter numbers are published with (a JSON object,
name to number), for the same reason."""


def lora_ids_of(labels: Mapping[str, str]) -> dict[str, int]:
    """The adapter numbers a stored replica's labels carry; none when absent or unreadable."""
    raw = labels.get(LORA_LABEL)
    if not raw:
        return {}
    try:
        decoded = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(decoded, dict):
        return {}
    return {str(k): v for k, v in decoded.items() if isinstance(v, int)}


def schedules_by_priority(engine: str, args: Sequence[str]) -> bool:
    """Whether an engine started with `args` schedules by vLLM's request priority."""
    if engine not in PRIORITY_ENGINES:
        return False
    for i, arg in enumerate(args):
        if arg == "--scheduling-policy=priority":
            return True
        if arg == "--scheduling-policy" and args[i + 1 : i + 2] == ("priority",):
            return True
    return False


def replica_spec(record: ReplicaRecord, catalog: Catalog, api_key: str) -> EndpointSpec:
    """How the router knows one replica."""
    model = catalog.resolve(record.model)
    profile = model.profile_by_name(record.profile) if model is not None else None
    head = record.parts[0]
    engine = head.report.engine if head.report is not None else ""
    engine = engine or (profile.engine if profile is not None else "")
    priority = profile is not None and schedules_by_priority(engine, tuple(profile.args))
    labels = {"node": head.assignment.node_id, "profile": record.profile}
    if priority:
        labels[SCHEDULING_LABEL] = "priority"
    lora_ids: dict[str, int] = {}
    if engine == "llamacpp" and model is not None:
        engine_profile = model.engine_profile(record.profile)
        lora_ids = adapter_ids(engine_profile) if engine_profile is not None else {}
    if lora_ids:
        labels[LORA_LABEL] = orjson.dumps(lora_ids).decode()
    return EndpointSpec(
        id=record.id,
        url=record.url,
        models=(record.model,),
        engine=engine,
        api_key=api_key,
        weight=profile.weight if profile is not None and profile.weight > 0 else 1.0,
        pool=record.model,
        labels=labels,
        priority_scheduling=priority,
        lora_ids=lora_ids,
    )


class Publisher:
    """Keeps the router's endpoint set equal to the static endpoints plus the replicas in
    force: on the leader, its book's routable replicas (`sync`), together with the set
    it followed before it led (`inherited`) until it has settled; on a follower, the set
    the leader wrote to the store (`follow`)."""

    def __init__(self, registry: EndpointRegistry, static: Sequence[EndpointSpec] = ()) -> None:
        self.registry = registry
        self.static = tuple(static)
        self.replicas: tuple[EndpointSpec, ...] = ()
        """The leader's own routable replicas, as last synced."""
        self.inherited: tuple[EndpointSpec, ...] = ()
        """The set followed from the store: a follower's whole set, and a new leader's
        until its agents have had time to come back (`settle`)."""
        self._published: tuple[EndpointSpec, ...] | None = None

    def sync(
        self, records: Iterable[ReplicaRecord], catalog: Catalog, api_key: Callable[[str], str]
    ) -> list[str]:
        """Publishes the book's routable replicas (with whatever is inherited); returns the
        ids withdrawn by this call."""
        self.replicas = tuple(
            sorted(
                (replica_spec(r, catalog, api_key(r.id)) for r in records if routable(r)),
                key=lambda s: s.id,
            )
        )
        return self._publish()

    def follow(self, specs: Iterable[EndpointSpec]) -> list[str]:
        """Publishes the replica set another server leads (this one has no book of its own)."""
        self.replicas = ()
        self.inherited = tuple(sorted(specs, key=lambda s: s.id))
        return self._publish()

    def settle(self) -> list[str]:
        """The leader vouches for its own replicas alone from now on."""
        if not self.inherited:
            return []
        self.inherited = ()
        return self._publish()

    def _publish(self) -> list[str]:
        own = {spec.id for spec in self.replicas}
        merged = sorted((*self.replicas, *(s for s in self.inherited if s.id not in own)), key=lambda s: s.id)
        specs = (*self.static, *merged)
        if specs == self._published:
            return []
        self._published = specs
        return self.registry.publish(specs)

    def published_ids(self) -> set[str]:
        return {spec.id for spec in self._published or ()}

    def endpoint(self, replica_id: str) -> Endpoint | None:
        """The router's live view of a published replica: its in-flight count is what a
        drain waits on, and the object outlives its withdrawal while requests hold it."""
        return self.registry.get(replica_id)

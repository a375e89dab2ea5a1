"""The replicas the gateway may send to, and what it knows of each.

An `Endpoint` is one engine replica (or one key of an external provider) with its
live state: requests this gateway has in flight there, the load it last reported, its
breaker. The `EndpointRegistry` is the set in force. In router-only mode it is built
once from the static `endpoints:` of the configuration; the control plane publishes
into the same registry as replicas become ready and are withdrawn. Publishing keeps the
live state of an endpoint that stays, so a republish never resets a breaker or
forgets requests in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from llmgw.engines.load import NAMES_BY_ENGINE, EngineLoad, MetricNames
from llmgw.router.breaker import Breaker
from llmgw.upstream import OriginPool, UpstreamClient


@dataclass(frozen=True, slots=True)
class EndpointSpec:
    """What is published about a replica: where it is and what it serves."""

    id: str
    url: str
    models: tuple[str, ...]
    engine: str = ""
    api_key: str = ""
    weight: float = 1.0
    priority: int = 0
    # For an external provider: the name it knows the model by.
    upstream_model: str | None = None
    external: bool = False
    # Replicas of one model in a pool share an id prefix; free-form, for operators.
    pool: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    # The engine schedules by vLLM's request `priority` and preempts worse work.
    priority_scheduling: bool = False
    # llama-server: its adapters by name, as numbers in its load order. It knows no
    # adapter names; a request for one carries `lora: [{"id": N, "scale": S}]`.
    lora_ids: dict[str, int] = field(default_factory=dict)
    # vLLM's KV-event publisher (tcp://host:port); set, the router indexes the blocks it
    # reports and routes on them (llmgw.router.kv_routing).
    kv_events: str = ""


def _path_prefix(url: str) -> bytes:
    path = urlsplit(url).path.rstrip("/")
    # Both `http://host:8000` and `http://host:8000/v1` are written in practice.
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return path.encode()


class Endpoint:
    """One replica and the gateway's live view of it."""

    __slots__ = (
        "auth_header",
        "breaker",
        "id",
        "inflight",
        "last_error",
        "load",
        "metric_names",
        "path_prefix",
        "pool",
        "priority",
        "scraped_at",
        "spec",
        "weight",
    )

    def __init__(self, spec: EndpointSpec, pool: OriginPool, breaker: Breaker) -> None:
        self.spec = spec
        # Copied out of the spec because the picker reads them for every candidate of
        # every request.
        self.id = spec.id
        self.weight = spec.weight if spec.weight > 0 else 1.0
        self.priority = spec.priority
        self.pool = pool
        self.breaker = breaker
        self.path_prefix = _path_prefix(spec.url)
        self.auth_header = f"Authorization: Bearer {spec.api_key}\r\n".encode() if spec.api_key else b""
        self.metric_names: MetricNames = NAMES_BY_ENGINE.get(spec.engine, NAMES_BY_ENGINE[""])
        self.inflight = 0
        self.load = EngineLoad()
        self.scraped_at: float | None = None
        # The last failed try here, for operators (`llmgw ctl replicas`): monotonic
        # seconds and what went wrong, in words that never hold a credential.
        self.last_error: tuple[float, str] | None = None

    def __repr__(self) -> str:
        return f"Endpoint({self.spec.id!r}, inflight={self.inflight})"


class EndpointRegistry:
    """The endpoints in force, by id and by model name."""

    def __init__(self, client: UpstreamClient, failure_threshold: int, cooldown: float) -> None:
        self._client = client
        self._failure_threshold = failure_threshold
        self._cooldown = cooldown
        self._by_id: dict[str, Endpoint] = {}
        self._by_model: dict[str, list[Endpoint]] = {}
        self._published: dict[str, asyncio.Event] = {}
        self.version = 0

    def publish(self, specs: Iterable[EndpointSpec]) -> list[str]:
        """Makes `specs` the set in force; returns the ids that were withdrawn."""
        fresh: dict[str, Endpoint] = {}
        for spec in specs:
            current = self._by_id.get(spec.id)
            if current is not None and current.spec == spec:
                fresh[spec.id] = current
                continue
            endpoint = Endpoint(
                spec, self._client.pool_for(spec.url), Breaker(self._failure_threshold, self._cooldown)
            )
            if current is not None:
                # Same replica, new description: keep what is live about it.
                endpoint.inflight = current.inflight
                endpoint.breaker = current.breaker
                endpoint.last_error = current.last_error
                endpoint.load, endpoint.scraped_at = current.load, current.scraped_at
            fresh[spec.id] = endpoint
        withdrawn = [eid for eid in self._by_id if eid not in fresh]
        by_model: dict[str, list[Endpoint]] = {}
        for endpoint in fresh.values():
            for model in endpoint.spec.models:
                by_model.setdefault(model, []).append(endpoint)
        self._by_id, self._by_model = fresh, by_model
        self.version += 1
        for model, event in self._published.items():
            if model in by_model:
                event.set()
            else:
                event.clear()
        return withdrawn

    def published(self, model: str) -> asyncio.Event:
        """An event set while `model` has at least one endpoint: what a request for a
        model being started waits on."""
        event = self._published.get(model)
        if event is None:
            event = self._published[model] = asyncio.Event()
            if model in self._by_model:
                event.set()
        return event

    def for_model(self, model: str) -> list[Endpoint]:
        """The endpoints serving `model` (do not modify the list)."""
        return self._by_model.get(model, [])

    def get(self, endpoint_id: str) -> Endpoint | None:
        return self._by_id.get(endpoint_id)

    def all(self) -> list[Endpoint]:
        return list(self._by_id.values())

    def models(self) -> list[str]:
        return sorted(self._by_model)

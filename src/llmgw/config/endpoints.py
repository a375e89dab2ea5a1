"""Static engine replicas for router-only mode.

Used only when the file has no model with profiles, i.e. nothing gets placed: requests
go straight to these addresses. This is how a quick test against simulated engines runs
with no control plane at all.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, field_validator, model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.config.values import NonNegativeFloat
from llmgw.core.strict import Strict
from llmgw.engines import ENGINES

ENDPOINT_ENGINES: tuple[str, ...] = ENGINES
# Engines that take vLLM's request `priority` (lower served sooner) under
# `--scheduling-policy priority`; "" assumes vLLM.
PRIORITY_ENGINES: tuple[str, ...] = ("", "vllm", "sim")


class Endpoint(Strict):
    """One engine replica."""

    id: str = ""
    """Names the replica in logs, metrics and the console; unique."""
    url: str = ""
    """The engine's base address, http:// or https://."""
    api_key: str = ""
    """Bearer token for engines that require one."""
    models: tuple[str, ...] = ()
    """The model names this replica answers for."""
    engine: str = ""
    """Engine type, which tells the scraper how its metrics are named; empty assumes vLLM."""
    pool: str = ""
    """A name grouping replicas, meant for routing and the console; this version does not
    act on it (`llmgw.config.inert`). Empty is the default pool."""
    weight: NonNegativeFloat = 0
    """Capacity relative to the others; 0 counts as 1."""
    priority: int = 0
    """Higher is preferred while it has room."""
    priority_scheduling: bool = False
    """The engine runs with vLLM's `--scheduling-policy priority` (the sim takes the same
    flag): the gateway sends each request's band as the engine's `priority`, and admits a
    band past lower-band work the engine can preempt."""
    lora_ids: dict[str, int] = Field(default_factory=dict)
    """llamacpp only: the catalog's adapter names this llama-server serves, each with its
    number in the server's `--lora` list (from 0); a request for one carries
    `lora: [{"id": N, "scale": S}]` (the adapter's scale), since llama-server knows
    adapters by number."""

    kv_events: str = ""
    """The replica's KV-cache event publisher, tcp://HOST:PORT (vLLM's `--kv-events-config`
    endpoint, or the sim's `--kv-events-port`); set, the router indexes the blocks it
    reports and sends a prompt to the replica holding most of it (`router.kv_index`)."""

    @property
    def effective_weight(self) -> float:
        return self.weight or 1.0

    @field_validator("engine")
    @classmethod
    def _known(cls, value: str) -> str:
        if value and value not in ENDPOINT_ENGINES:
            raise ValueError(
                f"{value!r} is not an engine llmgw reads metrics from: use {', '.join(ENDPOINT_ENGINES)}"
            )
        return value

    @model_validator(mode="after")
    def _complete(self) -> Endpoint:
        problems: list[Problem] = []
        if not self.id:
            problems.append(Problem(("id",), "is required: name the replica, like sim-1"))
        if not self.url:
            problems.append(
                Problem(("url",), "is required: the engine's address, like http://127.0.0.1:8001")
            )
        elif not self.url.startswith(("http://", "https://")):
            problems.append(Problem(("url",), f"{self.url!r} has no http:// or https:// scheme: add it"))
        if self.kv_events and not self.kv_events.startswith("tcp://"):
            problems.append(
                Problem(("kv_events",), f"{self.kv_events!r} is not a ZeroMQ address: write tcp://HOST:PORT")
            )
        if not self.models:
            problems.append(Problem(("models",), "is empty: list at least one model this replica serves"))
        if self.priority_scheduling and self.engine not in PRIORITY_ENGINES:
            problems.append(
                Problem(
                    ("priority_scheduling",),
                    f"engine {self.engine!r} does not take vLLM's request priority: "
                    "use it with vllm or sim engines, or set it to false",
                )
            )
        if self.lora_ids and self.engine != "llamacpp":
            problems.append(
                Problem(
                    ("lora_ids",),
                    f"is for llamacpp endpoints, and this one's engine is {self.engine or 'vllm'!r}: "
                    "other engines take the adapter's name, so remove lora_ids",
                )
            )
        for name, number in self.lora_ids.items():
            if number < 0:
                problems.append(
                    Problem(("lora_ids", name), f"is {number}: give the adapter's place in --lora, from 0")
                )
        refuse("Endpoint", problems)
        return self


def _distinct(endpoints: tuple[Endpoint, ...]) -> tuple[Endpoint, ...]:
    seen: dict[str, int] = {}
    problems: list[Problem] = []
    for i, endpoint in enumerate(endpoints):
        if endpoint.id in seen:
            problems.append(
                Problem(
                    (i, "id"),
                    f"{endpoint.id!r} is already endpoints[{seen[endpoint.id]}]'s id: give each its own",
                )
            )
        seen.setdefault(endpoint.id, i)
    refuse("Endpoints", problems)
    return endpoints


Endpoints = Annotated[tuple[Endpoint, ...], AfterValidator(_distinct)]
"""The static replica list, with distinct ids."""

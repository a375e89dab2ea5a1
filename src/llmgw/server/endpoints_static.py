"""The endpoints a router-only gateway starts with: the configuration's static
`endpoints:`, and one per key of each external model.

External models are served by someone else's OpenAI-compatible API. Each of a
provider's keys is its own endpoint (`external:MODEL#2`), so a key the provider
refuses (401) or limits (429) is passed over while its breaker is open and the request
goes out on another. Keys are read here, once, at start, by the one secret resolver
(a file, `env:NAME`, or `vault:` read when the server started): a key that cannot be
had stops the start with its setting, rather than failing the first request.
"""

from __future__ import annotations

from collections.abc import Mapping

from llmgw.catalog import Model
from llmgw.config import Settings
from llmgw.config.secrets import resolve_secret
from llmgw.router.endpoints import EndpointSpec


def _read_key(reference: str, model: str, field: str, vault: Mapping[str, str] | None) -> str:
    return resolve_secret(reference, f"models[{model}].{field}", vault=vault)


def external_specs(model: Model, vault: Mapping[str, str] | None = None) -> list[EndpointSpec]:
    """The endpoints of one external model: one per key, or one with no key. `vault`
    holds the values of `vault:` references read at start."""
    external = model.external
    if external is None:
        return []

    def spec(endpoint_id: str, key: str, weight: float) -> EndpointSpec:
        return EndpointSpec(
            id=endpoint_id,
            url=external.url,
            models=(model.name,),
            engine="external",
            api_key=key,
            weight=weight,
            upstream_model=external.model,
            external=True,
        )

    if external.api_key_files:
        return [
            spec(
                f"external:{model.name}#{i}",
                _read_key(key.file, model.name, f"external.api_key_files[{i - 1}].file", vault),
                key.weight or 1.0,
            )
            for i, key in enumerate(external.api_key_files, start=1)
        ]
    key = (
        _read_key(external.api_key_file, model.name, "external.api_key_file", vault)
        if external.api_key_file
        else ""
    )
    return [spec(f"external:{model.name}", key, 1.0)]


def static_specs(settings: Settings, vault: Mapping[str, str] | None = None) -> list[EndpointSpec]:
    """Every endpoint a router-only gateway routes to."""
    specs = [
        EndpointSpec(
            id=e.id,
            url=e.url,
            models=tuple(e.models),
            engine=e.engine,
            api_key=e.api_key,
            weight=e.weight or 1.0,
            priority=e.priority,
            pool=e.pool,
            priority_scheduling=e.priority_scheduling,
            lora_ids=dict(e.lora_ids),
            kv_events=e.kv_events,
        )
        for e in settings.endpoints
    ]
    for model in settings.catalog().models():
        specs.extend(external_specs(model, vault))
    return specs

"""From the name a client sent to what the gateway routes: a `Target`.

A client may name a model, one of its aliases, or an adapter (a LoRA served on a
model's replicas, asked for like a model). Each resolves to the model whose replicas
serve it, the name to send those replicas, the limits to check before sending, and the
chain of fallbacks to try when the model cannot answer. Fallbacks were resolved when
the catalog was built, so a typo there stopped the deployment rather than an outage.

In router-only mode a replica may also list a name the catalog does not have; it is
routed as it is, with nothing to check.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmgw.catalog import Adapter, Catalog, Model
from llmgw.errors import BadRequest, NotFound
from llmgw.router.request import ClientRequest, Kind


@dataclass(frozen=True, slots=True)
class Target:
    """What one request is routed as."""

    model: str
    """The canonical model whose replicas serve it: the name metrics and headers use."""
    engine_model: str
    """The name the replicas know it by: the model's own, or the adapter's."""
    routing_profile: str
    context_length: int = 0
    max_output: int = 0
    fallbacks: tuple[str, ...] = ()
    external: bool = False
    owner: str = ""
    """For an adapter with an owner (`team:ID`…): only callers inside it may see it."""
    adapter_source: str = ""
    """For an adapter: its files, which a replica loading it on demand is given."""
    adapter_scale: float = 1.0
    """For an adapter: how strongly it is applied (llama-server takes it per request)."""
    max_loaded_adapters: int = 0
    """For an adapter of a model that loads them on demand: each replica's slots."""

    @property
    def on_demand(self) -> bool:
        """An adapter the router loads onto replicas before sending them requests for it."""
        return self.max_loaded_adapters > 0 and self.engine_model != self.model


class TargetResolver:
    """Resolves client names against the catalog and the published replicas."""

    def __init__(self, catalog: Catalog, default_profile: str) -> None:
        self._catalog = catalog
        self._default_profile = default_profile

    def replace(self, catalog: Catalog) -> None:
        """A runtime catalog change: names resolve against `catalog` from now on."""
        self._catalog = catalog

    def _for_model(
        self, model: Model, engine_model: str, owner: str = "", adapter: Adapter | None = None
    ) -> Target:
        return Target(
            model=model.name,
            engine_model=engine_model,
            routing_profile=model.routing_profile or self._default_profile,
            context_length=model.context_length,
            max_output=model.max_output,
            fallbacks=tuple(model.fallbacks),
            external=model.is_external,
            owner=owner,
            adapter_source=adapter.source if adapter is not None else "",
            adapter_scale=adapter.effective_scale if adapter is not None else 1.0,
            max_loaded_adapters=model.max_loaded_adapters if adapter is not None else 0,
        )

    def resolve(self, name: str, *, routable: bool) -> Target:
        """The target for `name`; `routable` says whether some replica lists the bare
        name, which is enough in router-only mode. Unknown names are 404."""
        model = self._catalog.resolve(name)
        if model is not None and not model.is_guard:
            return self._for_model(model, model.name)
        found = self._catalog.resolve_adapter(name)
        if found is not None:
            base, adapter, _ = found
            return self._for_model(base, adapter.name, adapter.owner, adapter)
        if routable and model is None:
            return Target(model=name, engine_model=name, routing_profile=self._default_profile)
        raise unknown_model(name)

    def fallback(self, name: str) -> Target | None:
        """A fallback's target; never a guard model, which judges traffic rather than
        serving it."""
        model = self._catalog.resolve(name)
        return None if model is None or model.is_guard else self._for_model(model, model.name)


def unknown_model(name: str) -> NotFound:
    """The refusal for a name that is not a model here, or not one the caller may see:
    both read the same, so a key cannot probe for models it is not allowed."""
    return NotFound(
        f"model {name!r} does not exist here: GET /v1/models lists the models you can use",
        param="model",
        code="model_not_found",
    )


def check_limits(request: ClientRequest, target: Target) -> None:
    """Refuses, before any replica is asked, what the model's declared limits cannot take."""
    wanted = request.max_tokens
    if target.max_output and wanted is not None and wanted > target.max_output:
        raise BadRequest(
            f"{request.max_tokens_field} {wanted} is more than model {target.model!r} writes in one "
            f"answer ({target.max_output}): ask for at most {target.max_output}",
            param=request.max_tokens_field,
            code="max_tokens_too_large",
        )
    if not target.context_length:
        return
    floor = request.prompt_token_floor
    if wanted is not None and floor + wanted > target.context_length:
        raise BadRequest(
            f"the prompt (at least {floor} tokens) and max_tokens {wanted} do not fit model "
            f"{target.model!r}'s context of {target.context_length} tokens: "
            "shorten the prompt or lower max_tokens",
            param=_prompt_field(request),
            code="context_length_exceeded",
        )
    if floor > target.context_length:
        raise BadRequest(
            f"the prompt (at least {floor} tokens) is longer than model {target.model!r}'s context of "
            f"{target.context_length} tokens: shorten it",
            param=_prompt_field(request),
            code="context_length_exceeded",
        )


def _prompt_field(request: ClientRequest) -> str:
    return {Kind.CHAT: "messages", Kind.COMPLETIONS: "prompt", Kind.EMBEDDINGS: "input"}[request.kind]

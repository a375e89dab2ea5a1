"""The models clients may name, as `/v1/models` lists them.

Catalog models with what a client choosing between them needs (description, aliases,
context length, output bound, capabilities) and whether the model is simulated, so
nobody mistakes a sim's placeholder text for a real model's answer. Guard models judge
traffic and are never listed; hidden environment entries neither. In router-only mode,
names only a replica lists appear as bare entries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmgw.catalog import Catalog, Model
from llmgw.router.endpoints import EndpointRegistry


def _entry(model: Model, simulated: bool) -> dict[str, Any]:
    caps = model.capabilities
    return {
        "id": model.name,
        "object": "model",
        "created": 0,
        "owned_by": "llmgw",
        "description": model.description,
        "aliases": list(model.aliases),
        "context_length": model.context_length or None,
        "max_output": model.max_output or None,
        "capabilities": {
            "tools": caps.tools,
            "vision": caps.vision,
            "embeddings": caps.embeddings,
            "images": caps.images,
            "meshes": caps.meshes,
        },
        "simulated": simulated,
    }


class ModelsView:
    """Builds `/v1/models` entries from the catalog and the published replicas."""

    def __init__(self, catalog: Catalog, endpoints: EndpointRegistry) -> None:
        self._catalog = catalog
        self._endpoints = endpoints

    def replace(self, catalog: Catalog) -> None:
        """A runtime catalog change: listed from now on."""
        self._catalog = catalog

    def _simulated(self, model: Model) -> bool:
        if model.profiles:
            return model.simulated
        # A router-only model is simulated when every replica serving it is a sim.
        serving = self._endpoints.for_model(model.name)
        return bool(serving) and all(e.spec.engine == "sim" for e in serving)

    def _visible(self) -> list[Model]:
        return [m for m in self._catalog.models() if not m.is_guard and not m.is_environment]

    def list(self, allowed: Callable[[str], bool] | None = None) -> list[dict[str, Any]]:
        """Every model, or (with auth) those `allowed` to the caller."""
        entries = [_entry(m, self._simulated(m)) for m in self._visible()]
        known = {m.name for m in self._catalog.models()}
        for name in self._endpoints.models():
            if name not in known and self._catalog.resolve(name) is None:
                entries.append({"id": name, "object": "model", "created": 0, "owned_by": "llmgw"})
        if allowed is not None:
            entries = [entry for entry in entries if allowed(entry["id"])]
        return entries

    def get(self, name: str, allowed: Callable[[str], bool] | None = None) -> dict[str, Any] | None:
        model = self._catalog.resolve(name)
        if allowed is not None and not allowed(model.name if model is not None else name):
            return None
        if model is not None and not model.is_guard and not model.is_environment:
            return _entry(model, self._simulated(model))
        if model is None and self._endpoints.for_model(name):
            return {"id": name, "object": "model", "created": 0, "owned_by": "llmgw"}
        return None

"""Fixtures for the catalog tests: one valid definition of each kind of model, written
as YAML gives it (plain dicts), and a builder that turns dicts into a catalog.

Every rule test starts from one of these and changes one thing, so a failure names the
one thing that changed."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from llmgw.catalog import Catalog, Model

Definition = dict[str, Any]

_COMMIT = "0123456789abcdef0123456789abcdef01234567"

_VALID: dict[str, Definition] = {
    "gpu": {
        "name": "chat",
        "source": "Qwen/Qwen3-8B",
        "aliases": ["chat-latest"],
        "profiles": [{"name": "h100", "engine": "vllm", "gpu_class": "h100-80g", "tp": 2}],
        "scaling": {"min": 1, "max": 2},
    },
    "cpu": {
        "name": "small",
        "source": "mirror/qwen3-0.6b-q4.gguf",
        "profiles": [{"name": "cpu", "engine": "llamacpp", "cpu_cores": 4}],
    },
    "comfy": {
        "name": "pictures",
        "source": "mirror/flux1-schnell-fp8.safetensors",
        "profiles": [{"name": "l40s", "engine": "comfyui", "gpu_class": "l40s-48g"}],
        "comfyui": {
            "workflow": "flux-schnell",
            "nodes": [{"repo": "https://github.com/o/n", "commit": _COMMIT}],
        },
        "scaling": {"max": 1},
    },
    "external": {
        "name": "gpt",
        "source": "openai/gpt-4o-mini",
        "external": {
            "url": "https://api.openai.com",
            "model": "gpt-4o-mini",
            "api_key_file": "/etc/llmgw/openai",
        },
    },
    "guard": {
        "name": "judge",
        "source": "Qwen/Qwen3Guard-Gen-0.6B",
        "role": "guard",
        "guard": {"format": "qwen3guard"},
        "profiles": [{"name": "l4", "gpu_class": "l4-24g"}],
        "scaling": {"min": 1},
    },
}


@pytest.fixture
def valid() -> Callable[[str], Definition]:
    """A fresh deep copy of the valid definition of a kind: gpu, cpu, comfy, external, guard."""

    def make(kind: str = "gpu") -> Definition:
        return copy.deepcopy(_VALID[kind])

    return make


@pytest.fixture
def build() -> Callable[..., Catalog]:
    """Builds a catalog from definitions given as dicts."""

    def make(*definitions: Definition) -> Catalog:
        return Catalog.build([Model.model_validate(d) for d in definitions])

    return make


@pytest.fixture
def commit() -> str:
    """A full commit id, as a custom node must be pinned to."""
    return _COMMIT

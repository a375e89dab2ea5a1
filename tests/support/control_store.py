"""Shared pieces of the control-store tests: a clock the test moves by hand, valid model
definitions to change one thing in, and settings whose `models:` they fill."""

from __future__ import annotations

import copy
from typing import Any

from llmgw.config import Settings

Definition = dict[str, Any]

SMALL: Definition = {
    "name": "small",
    "source": "mirror/qwen3-0.6b-q4.gguf",
    "profiles": [{"name": "cpu", "engine": "llamacpp", "cpu_cores": 4}],
    "scaling": {"min": 1, "max": 2},
}
CHAT: Definition = {
    "name": "chat",
    "source": "Qwen/Qwen3-8B",
    "profiles": [{"name": "h100", "engine": "vllm", "gpu_class": "h100-80g", "tp": 2}],
    "scaling": {"min": 1, "max": 2},
    "fallbacks": ["small"],
}


def definition(base: Definition, **changes: Any) -> Definition:
    """A deep copy of `base` with top-level keys changed (None removes one)."""
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def settings(*models: Definition) -> Settings:
    return Settings(models=[copy.deepcopy(m) for m in models])


class ManualClock:
    """Seconds that move only when the test says so."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

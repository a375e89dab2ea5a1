"""Adapters loaded at run time, as vLLM serves them with runtime LoRA updating
(`--max-loras N`): `POST /v1/load_lora_adapter` with `lora_name` and `lora_path`, and
`POST /v1/unload_lora_adapter` with `lora_name`.

A loaded adapter is served like a model (answers name it); an unloaded one is a 404.
Loading one already held is vLLM's 400. Unlike vLLM, which would evict from its own
cache, a load beyond `--max-loras` is refused with a 400: a router that overfills a
replica shows in `GET /sim/state` (`lora.refused_full`) instead of passing unnoticed.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from llmgw.sim.protocol import ApiError, bad_request


class LoraSlots:
    """The adapters one sim holds, with counters for tests."""

    def __init__(self, max_loras: int) -> None:
        self.max_loras = max_loras
        self.held: dict[str, str] = {}
        self.loads: dict[str, int] = {}
        self.unloads = 0
        self.double_loads = 0
        self.refused_full = 0
        self.peak = 0

    def load(self, name: str, path: str) -> None:
        if name in self.held:
            self.double_loads += 1
            raise ApiError(400, f"The lora adapter '{name}' has already been loaded.", param="lora_name")
        if len(self.held) >= self.max_loras:
            self.refused_full += 1
            raise ApiError(
                400,
                f"Cannot load adapter '{name}': all {self.max_loras} LoRA slots are taken; unload one first.",
                param="lora_name",
            )
        self.held[name] = path
        self.loads[name] = self.loads.get(name, 0) + 1
        self.peak = max(self.peak, len(self.held))

    def unload(self, name: str) -> None:
        if self.held.pop(name, None) is None:
            raise ApiError(404, f"The lora adapter '{name}' cannot be found.", kind="NotFoundError")
        self.unloads += 1

    def describe(self) -> dict[str, Any]:
        return {
            "max_loras": self.max_loras,
            "held": sorted(self.held),
            "loads": dict(self.loads),
            "unloads": self.unloads,
            "double_loads": self.double_loads,
            "refused_full": self.refused_full,
            "peak": self.peak,
        }


LORA_SLOTS = web.AppKey("sim_lora", LoraSlots)


async def _fields(request: web.Request, *names: str) -> list[str]:
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        raise bad_request("the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    out: list[str] = []
    for name in names:
        value = body.get(name)
        if not isinstance(value, str) or not value:
            raise bad_request(f"{name}: give a non-empty string", name)
        out.append(value)
    return out


async def load_lora_adapter(request: web.Request) -> web.Response:
    name, path = await _fields(request, "lora_name", "lora_path")
    request.app[LORA_SLOTS].load(name, path)
    return web.Response(text=f"Success: LoRA adapter '{name}' added successfully.")


async def unload_lora_adapter(request: web.Request) -> web.Response:
    (name,) = await _fields(request, "lora_name")
    request.app[LORA_SLOTS].unload(name)
    return web.Response(text=f"Success: LoRA adapter '{name}' removed successfully.")


def add_lora_routes(app: web.Application, slots: LoraSlots) -> None:
    app[LORA_SLOTS] = slots
    app.router.add_post("/v1/load_lora_adapter", load_lora_adapter)
    app.router.add_post("/v1/unload_lora_adapter", unload_lora_adapter)

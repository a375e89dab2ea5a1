"""The engine-specific endpoints of each flavor: health, metrics, tokenizer, slots, props.

- all flavors: `GET /health` (503 while starting; llama-server's body shapes), `GET /metrics`;
- vLLM: `POST /tokenize` and `/detokenize`, `GET /version`, `POST /reset_prefix_cache`;
- llama-server: `GET /slots`, `GET /props`, `POST /tokenize` and `/detokenize` in its
  shapes (`content` in, `tokens` out);
- SGLang: `GET /get_model_info`, `GET /get_server_info`, `POST /flush_cache`.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from llmgw.sim.chat_template import TEMPLATE_SOURCE, TemplateError, render_chat
from llmgw.sim.metrics import TEXT_CONTENT_TYPE
from llmgw.sim.options import Flavor
from llmgw.sim.protocol import bad_request, parse_json, resolve_model
from llmgw.sim.state import SIM_STATE, SimState

SIM_VERSION = "0.0.0+llmgw.sim"


def _json(payload: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")


async def health(request: web.Request) -> web.Response:
    """200 once started, 503 before; llama-server answers with its JSON bodies."""
    state = request.app[SIM_STATE]
    ready = state.ready()
    if state.options.flavor is Flavor.LLAMACPP:
        if ready:
            return _json({"status": "ok"})
        return _json({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}, 503)
    return web.Response(status=200 if ready else 503)


async def metrics(request: web.Request) -> web.Response:
    """The flavor's Prometheus text."""
    body = request.app[SIM_STATE].engine.render_metrics()
    return web.Response(body=body, headers={"Content-Type": TEXT_CONTENT_TYPE})


def _tokenize_input(state: SimState, body: dict[str, Any]) -> list[int]:
    tokenizer = state.engine.tokenizer
    if "messages" in body:
        messages = body["messages"]
        if not isinstance(messages, list):
            raise bad_request("messages: must be a list of {role, content} objects", "messages")
        try:
            text = render_chat(messages, bool(body.get("add_generation_prompt", True)))
        except TemplateError as exc:
            raise bad_request(str(exc), "messages") from exc
        return tokenizer.encode(text)
    key = "content" if state.options.flavor is Flavor.LLAMACPP else "prompt"
    raw = body.get(key, body.get("prompt", body.get("content")))
    if not isinstance(raw, str):
        raise bad_request(f"{key}: must be the text to tokenize", key)
    return tokenizer.encode(raw)


async def tokenize(request: web.Request) -> web.Response:
    """Token ids of a prompt or of chat messages (rendered as chat completions renders them)."""
    state = request.app[SIM_STATE]
    body = parse_json(await request.read())
    if state.options.flavor is not Flavor.LLAMACPP and "model" in body:
        resolve_model(body, state.served_names())
    ids = _tokenize_input(state, body)
    if state.options.flavor is Flavor.LLAMACPP:
        return _json({"tokens": ids})
    return _json(
        {"count": len(ids), "max_model_len": state.options.max_model_len, "tokens": ids, "token_strs": None}
    )


async def detokenize(request: web.Request) -> web.Response:
    """Text of token ids this sim has produced."""
    state = request.app[SIM_STATE]
    body = parse_json(await request.read())
    ids = body.get("tokens")
    if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
        raise bad_request("tokens: must be a list of token ids", "tokens")
    text = state.engine.tokenizer.decode(ids)
    key = "content" if state.options.flavor is Flavor.LLAMACPP else "prompt"
    return _json({key: text})


async def version(request: web.Request) -> web.Response:
    """vLLM's `/version`."""
    del request
    return _json({"version": SIM_VERSION})


async def reset_prefix_cache(request: web.Request) -> web.Response:
    """Drop every cached block no request uses (vLLM's `/reset_prefix_cache`, SGLang's `/flush_cache`)."""
    request.app[SIM_STATE].engine.pool.reset()
    return web.Response(status=200)


async def slots(request: web.Request) -> web.Response:
    """llama-server's `/slots`: one entry per parallel slot, busy or idle."""
    state = request.app[SIM_STATE]
    state.engine.snapshot()
    by_slot = {job.slot: job for job in state.engine.scheduler.running_jobs()}
    out: list[dict[str, object]] = []
    for slot in range(state.options.max_seqs):
        job = by_slot.get(slot)
        busy = job is not None
        out.append(
            {
                "id": slot,
                "id_task": job.id if job is not None else -1,
                "n_ctx": state.options.max_model_len,
                "speculative": False,
                "is_processing": busy,
                "params": {
                    "n_predict": job.output_tokens if job is not None else -1,
                    "seed": state.options.seed,
                },
                "next_token": {
                    "has_next_token": busy,
                    "has_new_line": False,
                    "n_remain": job.output_tokens - job.emitted if job is not None else -1,
                    "n_decoded": job.emitted if job is not None else 0,
                    "stopping_word": "",
                },
            }
        )
    return _json(out)


async def props(request: web.Request) -> web.Response:
    """llama-server's `/props`."""
    o = request.app[SIM_STATE].options
    return _json(
        {
            "default_generation_settings": {
                "n_ctx": o.max_model_len,
                "params": {"n_predict": -1, "seed": o.seed},
            },
            "total_slots": o.max_seqs,
            "model_alias": o.served_model,
            "model_path": f"/models/{o.served_model}.gguf",
            "modalities": {"vision": False, "audio": False},
            "endpoint_slots": True,
            "endpoint_props": False,
            "endpoint_metrics": True,
            "webui": False,
            "chat_template": TEMPLATE_SOURCE,
            "bos_token": "<s>",
            "eos_token": "</s>",
            "build_info": SIM_VERSION,
        }
    )


async def model_info(request: web.Request) -> web.Response:
    """SGLang's `/get_model_info`."""
    o = request.app[SIM_STATE].options
    return _json({"model_path": o.served_model, "tokenizer_path": o.served_model, "is_generation": True})


async def server_info(request: web.Request) -> web.Response:
    """SGLang's `/get_server_info` (the parts a router reads)."""
    state = request.app[SIM_STATE]
    o = state.options
    snap = state.engine.snapshot()
    return _json(
        {
            "version": SIM_VERSION,
            "served_model_name": o.served_model,
            "max_running_requests": o.max_seqs,
            "max_total_num_tokens": o.kv_blocks * o.block_size,
            "page_size": o.block_size,
            "context_length": o.max_model_len,
            "internal_states": [{"num_running_reqs": snap.running, "num_queue_reqs": snap.waiting}],
        }
    )


def add_flavor_routes(app: web.Application, flavor: Flavor) -> None:
    """Register the common and the flavor's own engine endpoints."""
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
    if flavor is Flavor.VLLM:
        app.router.add_get("/version", version)
        app.router.add_post("/reset_prefix_cache", reset_prefix_cache)
    elif flavor is Flavor.LLAMACPP:
        app.router.add_get("/slots", slots)
        app.router.add_get("/props", props)
    else:
        app.router.add_get("/get_model_info", model_info)
        app.router.add_get("/get_server_info", server_info)
        app.router.add_post("/flush_cache", reset_prefix_cache)

"""`GET /v1/models` and `POST /v1/embeddings`.

The model list is vLLM's: every served name with its maximum context, and each adapter
listed with the first model as its `parent`, which is how the router learns which
adapters a replica holds. Embeddings are deterministic vectors (see `embeddings`),
answered after the prefill time of their tokens without entering the decode batch.
"""

from __future__ import annotations

import asyncio

import orjson
from aiohttp import web

from llmgw.sim.embeddings import embedding, encode_base64
from llmgw.sim.faults import STATUS_FAULTS, Action
from llmgw.sim.protocol import ApiError, bad_request, parse_embedding
from llmgw.sim.state import FAULT_EXIT_STATUS, SIM_STATE

_OWNER = {"vllm": "vllm", "llamacpp": "llamacpp", "sglang": "sglang"}


def _json(payload: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")


async def list_models(request: web.Request) -> web.Response:
    """The served models and adapters."""
    state = request.app[SIM_STATE]
    o = state.options
    owner = _OWNER[o.flavor.value]

    def card(name: str, root: str, parent: str | None) -> dict[str, object]:
        return {
            "id": name,
            "object": "model",
            "created": state.created,
            "owned_by": owner,
            "root": root,
            "parent": parent,
            "max_model_len": o.max_model_len,
        }

    data = [card(name, o.models[0], None) for name in o.models]
    data += [card(name, f"/adapters/{name}", o.models[0]) for name in o.adapters]
    return _json({"object": "list", "data": data})


async def embeddings(request: web.Request) -> web.Response:
    """Deterministic embeddings of each input."""
    state = request.app[SIM_STATE]
    o = state.options
    parsed = parse_embedding(await request.read(), state.served_names(), o.embedding_dim)
    action = state.faults.on_request(state.clock())
    if action is Action.STATUS:
        status, kind = STATUS_FAULTS[state.faults.setting.mode]
        raise ApiError(status, f"the sim engine is set to answer {status} (fault)", kind=kind)
    if action is Action.EXIT:
        state.exit_process(FAULT_EXIT_STATUS)
    if action is not Action.SERVE:
        # Hangs and cuts have no stream to act on here: the answer never comes.
        await asyncio.sleep(o.hang_s if action is Action.HANG_HEADERS else 0)
        if request.transport is not None:
            request.transport.close()
        return web.Response()
    tokenizer = state.engine.tokenizer
    dimensions = parsed.dimensions or o.embedding_dim
    data: list[dict[str, object]] = []
    total = 0
    for index, item in enumerate(parsed.inputs):
        ids = tokenizer.encode(item) if isinstance(item, str) else list(item)
        if not ids:
            raise bad_request(f"input[{index}]: is empty", "input")
        if len(ids) > o.max_model_len:
            raise bad_request(
                f"input[{index}]: {len(ids)} tokens exceed the model's maximum context of {o.max_model_len}",
                "input",
            )
        total += len(ids)
        vector = embedding(ids, dimensions, o.seed)
        data.append(
            {
                "index": index,
                "object": "embedding",
                "embedding": encode_base64(vector) if parsed.base64 else vector,
            }
        )
    await asyncio.sleep(state.engine.scheduler.cost.prefill_s(total))
    return _json(
        {
            "id": state.response_id("embd"),
            "object": "list",
            "created": state.created,
            "model": parsed.model,
            "data": data,
            "usage": {"prompt_tokens": total, "total_tokens": total, "completion_tokens": 0},
        }
    )

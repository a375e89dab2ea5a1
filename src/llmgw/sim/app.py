"""The sim's aiohttp applications: the engine's API, and the admin API on its own port.

One middleware maps `ApiError` to its status and OpenAI's error envelope, in one place,
and answers 503 to every engine endpoint but `/health` while the startup delay runs (as
llama-server does while it loads a model). Handlers live in `routes_*` modules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from llmgw.sim.lora import add_lora_routes
from llmgw.sim.protocol import ApiError
from llmgw.sim.routes_admin import add_admin_routes
from llmgw.sim.routes_engine import add_flavor_routes
from llmgw.sim.routes_generate import chat_completions, completions
from llmgw.sim.routes_openai import embeddings, list_models
from llmgw.sim.state import SIM_STATE, SimState

# Big enough for a prompt at a large --max-model-len; aiohttp's default is 1 MiB.
MAX_BODY_BYTES = 64 * 1024 * 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error_response(error: ApiError) -> web.Response:
    return web.Response(
        body=error.body(), status=error.status, content_type="application/json", headers=error.headers
    )


@web.middleware
async def _errors_and_readiness(request: web.Request, handler: Handler) -> web.StreamResponse:
    state = request.app[SIM_STATE]
    path = request.path
    if not path.startswith("/sim/") and path != "/health" and not state.ready():
        return _error_response(
            ApiError(
                503,
                "the sim engine is starting (startup delay)",
                kind="ServiceUnavailableError",
                headers={"Retry-After": "1"},
            )
        )
    if request.method == "POST" and path.startswith("/v1/"):
        state.last_traceparent = request.headers.get("traceparent", "")
    keys = state.options.api_keys
    if keys and path.startswith("/v1/"):
        given = request.headers.get("Authorization", "")
        if not given.startswith("Bearer ") or given[len("Bearer ") :] not in keys:
            return _error_response(
                ApiError(401, "Unauthorized: a valid API key is required", kind="AuthenticationError")
            )
    try:
        return await handler(request)
    except ApiError as error:
        return _error_response(error)


def create_app(state: SimState) -> web.Application:
    """The engine's HTTP API (OpenAI routes, flavor routes, and `/sim/*`)."""
    app = web.Application(middlewares=[_errors_and_readiness], client_max_size=MAX_BODY_BYTES)
    app[SIM_STATE] = state
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_get("/v1/models", list_models)
    add_flavor_routes(app, state.options.flavor)
    if state.options.max_loras:
        add_lora_routes(app, state.loras)
    add_admin_routes(app)

    async def stop_engine(app: web.Application) -> None:
        app[SIM_STATE].engine.close()

    app.on_cleanup.append(stop_engine)
    return app


def create_admin_app(state: SimState) -> web.Application:
    """Only `/sim/*`, for the admin port that outlives a closed main port."""
    app = web.Application(middlewares=[_errors_and_readiness])
    app[SIM_STATE] = state
    add_admin_routes(app)
    return app

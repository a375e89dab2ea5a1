"""The sim's own admin API, for tests and benchmarks (never part of a real engine).

- `GET /sim/state`: counters a test asserts on (requests seen, running, waiting, prefix
  cache queries, hits, cached blocks and evictions, the fault in force, readiness, the
  `traceparent` of the last API request);
- `GET /sim/fault` and `POST /sim/fault {"mode", "after", "stream_tokens", "duration_s"}`:
  read or switch the fault at run time, so a test can break a running replica;
- `GET /sim/quality` and `POST /sim/quality {"error_rate", "ttft_factor"}`: read or
  change the replica's quality (llmgw.sim.quality), as a canary's judge sees it
  (`/sim/state` adds `requests`: generation requests since it was set, failed ones too);
- `GET /sim/requests?limit=N`: the simulated timings of the last finished requests,
  which `bench/sim/overhead.py` compares with what a client observed.

These routes are served on the main port and, with `--admin-port`, on a port of their
own that stays open while the refuse fault closes the main one.
"""

from __future__ import annotations

import asyncio
import math

import orjson
from aiohttp import web

from llmgw.sim.faults import FaultSetting
from llmgw.sim.options import FaultMode
from llmgw.sim.protocol import bad_request, parse_json
from llmgw.sim.quality import check_quality
from llmgw.sim.scheduler import Job
from llmgw.sim.state import SIM_STATE, SimState

_BACKGROUND = web.AppKey("sim_admin_tasks", set[asyncio.Task[None]])


def _json(payload: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload), status=status, content_type="application/json")


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


async def apply_fault(state: SimState, setting: FaultSetting) -> None:
    """Switch the fault, opening or closing the main port as the refuse fault requires."""
    state.faults.set(setting, state.clock())
    listener = state.listener
    if listener is None:
        return
    if setting.mode is FaultMode.REFUSE:
        await listener.close()
    elif not listener.is_open:
        await listener.open()


async def reopen_when_lapsed(state: SimState) -> None:
    """Wait out a refuse fault's duration, then open the port again."""
    while state.faults.setting.mode is FaultMode.REFUSE and state.listener is not None:
        wait = state.faults.expires_at - state.clock()
        if math.isinf(wait):
            return
        await asyncio.sleep(max(0.0, wait))
        if state.faults.mode(state.clock()) is not FaultMode.REFUSE and not state.listener.is_open:
            await state.listener.open()
            return


def _spawn_reopen(app: web.Application, state: SimState) -> None:
    tasks = app[_BACKGROUND]
    task = asyncio.get_running_loop().create_task(reopen_when_lapsed(state))
    tasks.add(task)
    task.add_done_callback(tasks.discard)


def parse_setting(raw: bytes) -> FaultSetting:
    """A fault setting from the admin API's JSON, or a 400 naming the field."""
    body = parse_json(raw)
    unknown = set(body) - {"mode", "after", "stream_tokens", "duration_s"}
    if unknown:
        raise bad_request(f"{sorted(unknown)[0]}: unknown field; send mode, after, stream_tokens, duration_s")
    try:
        mode = FaultMode(body.get("mode", "none"))
    except ValueError as exc:
        known = ", ".join(m.value for m in FaultMode)
        raise bad_request(f"mode: {body.get('mode')!r} is not a fault; use one of {known}", "mode") from exc
    after = body.get("after", 0)
    stream_tokens = body.get("stream_tokens", 1)
    for key, value in (("after", after), ("stream_tokens", stream_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad_request(f"{key}: must be a whole number, 0 or more", key)
    duration = body.get("duration_s")
    if duration is not None and (
        isinstance(duration, bool) or not isinstance(duration, int | float) or duration <= 0
    ):
        raise bad_request("duration_s: must be a number of seconds above 0, or null", "duration_s")
    return FaultSetting(
        mode=mode,
        after=after,
        stream_tokens=stream_tokens,
        duration_s=None if duration is None else float(duration),
    )


async def get_fault(request: web.Request) -> web.Response:
    """The fault in force."""
    state = request.app[SIM_STATE]
    state.faults.mode(state.clock())
    return _json(state.faults.setting.describe())


async def post_fault(request: web.Request) -> web.Response:
    """Switch the fault at run time."""
    state = request.app[SIM_STATE]
    setting = parse_setting(await request.read())
    await apply_fault(state, setting)
    if setting.mode is FaultMode.REFUSE and setting.duration_s is not None:
        _spawn_reopen(request.app, state)
    return _json(setting.describe())


async def get_quality(request: web.Request) -> web.Response:
    """The replica's error rate and TTFT factor."""
    return _json(request.app[SIM_STATE].quality.quality.describe())


async def post_quality(request: web.Request) -> web.Response:
    """Change the error rate and TTFT factor at run time; a field left out keeps its value."""
    state = request.app[SIM_STATE]
    body = parse_json(await request.read())
    unknown = set(body) - {"error_rate", "ttft_factor"}
    if unknown:
        raise bad_request(f"{sorted(unknown)[0]}: unknown field; send error_rate, ttft_factor")
    now = state.quality.quality
    try:
        quality = check_quality(
            body.get("error_rate", now.error_rate), body.get("ttft_factor", now.ttft_factor)
        )
    except ValueError as exc:
        raise bad_request(str(exc), str(exc).split(":", 1)[0]) from None
    state.quality.set(quality)
    return _json(quality.describe())


async def get_state(request: web.Request) -> web.Response:
    """Counters for tests: traffic, queue, prefix cache, fault, readiness."""
    state = request.app[SIM_STATE]
    engine = state.engine
    snap = engine.snapshot()
    stats = engine.stats
    return _json(
        {
            "flavor": state.options.flavor.value,
            "ready": state.ready(),
            "requests_seen": stats.requests_arrived,
            "running": snap.running,
            "waiting": snap.waiting,
            "finished": dict(stats.finish_reasons),
            "prompt_tokens": stats.prompt_tokens,
            "generation_tokens": stats.generation_tokens,
            "preemptions": stats.preemptions,
            "prefix_cache": {
                "queries_tokens": stats.prefix_queries,
                "hits_tokens": stats.prefix_hits,
                "cached_blocks": snap.cached_blocks,
                "used_blocks": snap.kv_used_blocks,
                "capacity_blocks": snap.kv_capacity_blocks,
                "evictions": engine.pool.evictions,
            },
            "fault": state.faults.setting.describe(),
            "quality": {**state.quality.quality.describe(), "requests": state.quality.seen},
            "listening": state.listener.is_open if state.listener is not None else True,
            "last_traceparent": state.last_traceparent,
            "lora": state.loras.describe(),
        }
    )


def describe_job(job: Job) -> dict[str, object]:
    """One finished request's simulated timeline (seconds on the sim's monotonic clock)."""
    return {
        "id": job.tag,
        "state": job.state.value,
        "prompt_tokens": job.prompt_tokens,
        "cached_tokens": job.cached_tokens,
        "completion_tokens": job.emitted,
        "priority": job.priority,
        "preemptions": job.preemptions,
        "arrived_at": job.arrived_at,
        "admitted_at": _number(job.admitted_at),
        "first_token_at": _number(job.first_token_at),
        "last_token_at": _number(job.last_token_at),
        "ttft_s": _number(job.first_token_at - job.arrived_at),
        "queue_s": _number(job.admitted_at - job.arrived_at),
        "itl_mean_s": _number((job.last_token_at - job.first_token_at) / (job.emitted - 1))
        if job.emitted > 1
        else None,
        "first_write_at": _number(job.first_write_at),
        "last_write_at": _number(job.last_write_at),
    }


async def get_requests(request: web.Request) -> web.Response:
    """The last finished requests' simulated timings, oldest first."""
    state = request.app[SIM_STATE]
    raw_limit = request.query.get("limit", "1000")
    if not raw_limit.isdigit():
        raise bad_request("limit: must be a whole number", "limit")
    recent = list(state.engine.stats.recent)[-int(raw_limit) :] if int(raw_limit) else []
    return _json({"requests": [describe_job(job) for job in recent]})


def add_admin_routes(app: web.Application) -> None:
    """Register `/sim/*` on `app` (whose SIM_STATE the handlers use)."""
    app[_BACKGROUND] = set()
    app.router.add_get("/sim/state", get_state)
    app.router.add_get("/sim/fault", get_fault)
    app.router.add_post("/sim/fault", post_fault)
    app.router.add_get("/sim/quality", get_quality)
    app.router.add_post("/sim/quality", post_quality)
    app.router.add_get("/sim/requests", get_requests)

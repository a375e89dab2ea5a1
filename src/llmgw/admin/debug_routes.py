"""The profiler on the admin listener (`debug_pprof: true`), behind the admin token:

    GET /debug/pprof/                    what is here
    GET /debug/pprof/profile?seconds=10  a sampling CPU profile of the event loop's
                                         thread, as speedscope JSON (format=html:
                                         pyinstrument's page); one at a time
    GET /debug/pprof/tasks               every asyncio task with its stack (format=json)
    GET /debug/pprof/heap?seconds=10     allocations made in the window and still alive,
                                         the top 50 lines by size (format=json)

Off by default and never without the token: a heap sample and a stack can show where
the keys of recent requests and their prompts are held. Refusals use the admin API's
error shape (OpenAI's envelope).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from urllib.parse import parse_qs

import orjson

from llmgw.admin import token as admin_token
from llmgw.errors import ApiError, BadRequest, MethodNotAllowed, NotFound, Unauthorized
from llmgw.http.responses import JSON, api_error_response, error_body
from llmgw.http.rsgi import HTTPProtocol, Scope
from llmgw.obs.profiling import (
    PROFILE_FORMATS,
    CpuProfiler,
    HeapSampler,
    ProfileFormat,
    Rendered,
    task_stacks,
    tasks_text,
)

log = logging.getLogger(__name__)

PREFIX = "/debug/pprof"
MIN_SECONDS = 1.0
MAX_SECONDS = 60.0
DEFAULT_SECONDS = 10.0
_TEXT = "text/plain; charset=utf-8"
_INDEX = """llmgw profiling (debug_pprof), every route behind the admin token:

  /debug/pprof/profile?seconds=10   CPU profile, speedscope JSON (open in https://www.speedscope.app);
                                    &format=html for pyinstrument's page
  /debug/pprof/tasks                asyncio tasks and their stacks; ?format=json
  /debug/pprof/heap?seconds=10      allocations still alive after the window, top 50; ?format=json

seconds is 1 to 60. See docs/observability.md#profiling.
"""


def seconds_param(query: Mapping[str, str]) -> float:
    """`seconds`, 1 to 60, 10 when absent; BadRequest naming the field otherwise."""
    raw = query.get("seconds")
    if raw is None or raw == "":
        return DEFAULT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise BadRequest(
            f"seconds is {raw!r}: give a number from {MIN_SECONDS:g} to {MAX_SECONDS:g}", param="seconds"
        )
    return seconds


def format_param(query: Mapping[str, str], allowed: tuple[str, ...]) -> str:
    """`format`, one of `allowed` (the first when absent)."""
    fmt = query.get("format") or allowed[0]
    if fmt not in allowed:
        raise BadRequest(f"format is {fmt!r}: use {' or '.join(allowed)}", param="format")
    return fmt


class DebugRoutes:
    """`/debug/pprof/...` for one server process."""

    def __init__(
        self, token: str, profiler: CpuProfiler | None = None, heap: HeapSampler | None = None
    ) -> None:
        self._token = token
        self._profiler = profiler or CpuProfiler()
        self._heap = heap or HeapSampler()

    async def __call__(self, scope: Scope, proto: HTTPProtocol) -> None:
        if scope.proto != "http":
            return
        try:
            if not admin_token.matches(self._token, scope.headers.get("authorization")):
                raise Unauthorized(
                    "profiling needs 'Authorization: Bearer <admin token>' (the token is in "
                    "admin_token_file)",
                    code="invalid_admin_token",
                )
            if scope.method != "GET":
                raise MethodNotAllowed(f"{scope.method} {scope.path} is not served; use GET", allow="GET")
            query = {name: values[-1] for name, values in parse_qs(scope.query_string).items()}
            answer = await self._answer(scope.path, query, proto)
            proto.response_bytes(200, [("content-type", answer.content_type)], answer.body)
        except ApiError as error:
            status, headers, body = api_error_response(error)
            proto.response_bytes(status, headers, body)
        except Exception:  # a bug here must still answer in the API's shape, and be logged
            log.exception("profiling: %s %s failed", scope.method, scope.path)
            body = error_body("profiling failed on this request; the server log says why", "server_error")
            proto.response_bytes(500, [("content-type", JSON)], body)

    async def _answer(self, path: str, query: Mapping[str, str], proto: HTTPProtocol) -> Rendered:
        route = path[len(PREFIX) :].strip("/") if path.startswith(PREFIX) else None
        if route == "":
            return Rendered(_INDEX.encode(), _TEXT)
        if route == "profile":
            seconds = seconds_param(query)
            fmt: ProfileFormat = "html" if format_param(query, PROFILE_FORMATS) == "html" else "speedscope"
            return await self._profiler.record(seconds, fmt, _Watch(proto).wait)
        if route == "tasks":
            stacks = task_stacks(asyncio.all_tasks())
            if format_param(query, ("text", "json")) == "json":
                return Rendered(orjson.dumps({"data": [s.as_json() for s in stacks]}), JSON)
            return Rendered(tasks_text(stacks).encode(), _TEXT)
        if route == "heap":
            seconds = seconds_param(query)
            fmt_name = format_param(query, ("text", "json"))
            sample = await self._heap.record(seconds, _Watch(proto).wait)
            if fmt_name == "json":
                return Rendered(orjson.dumps(sample.as_json()), JSON)
            return Rendered(sample.as_text().encode(), _TEXT)
        raise NotFound(f"{path} is not served here; {PREFIX}/ lists what is", code="unknown_route")


class _Watch:
    """Waits out a recording's seconds, ending early when the client asking for it has
    gone: nobody would read what was recorded."""

    def __init__(self, proto: HTTPProtocol) -> None:
        self._proto = proto

    async def wait(self, seconds: float) -> None:
        gone = asyncio.ensure_future(self._proto.client_disconnect())
        try:
            await asyncio.wait({gone}, timeout=seconds)
        finally:
            gone.cancel()
            # asyncio.wait does not raise the watcher's cancellation, only the caller's own.
            await asyncio.wait({gone})

"""What `debug_pprof` answers: a sampling CPU profile, the asyncio tasks with their
stacks, and the allocations a few seconds of serving leave alive.

Each is made only when asked for and costs nothing otherwise: the CPU sampler
(pyinstrument) is armed for the seconds requested and then removed, and tracemalloc
traces only between the request's start and its snapshot. The gateway's work all runs
on one event loop thread, so the profile is taken of the thread that asks for it, the
loop's: `CpuProfiler.record` must be awaited on the loop being studied.

The outputs hold what the process holds (a heap sample can show where keys and
prompts are kept, a stack the values it was called with are not shown), which is why
the routes that serve them are off by default and behind the admin token
(llmgw.admin.debug_routes).
"""

from __future__ import annotations

import asyncio
import linecache
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass
from types import FrameType
from typing import Any, Literal

from pyinstrument import Profiler
from pyinstrument.renderers import HTMLRenderer, Renderer, SpeedscopeRenderer

from llmgw.errors import Conflict

ProfileFormat = Literal["speedscope", "html"]
PROFILE_FORMATS: tuple[ProfileFormat, ...] = ("speedscope", "html")

# 1 ms is pyinstrument's own default: fine enough for a request path whose steps
# take a few hundred microseconds each, summed over thousands of requests.
SAMPLE_INTERVAL_S = 0.001
TOP_ALLOCATIONS = 50
# An await chain deeper than this is a recursion, not a stack worth reading whole.
_MAX_AWAIT_DEPTH = 200

Wait = Callable[[float], Awaitable[object]]
"""How a recording waits out its seconds: `asyncio.sleep`, or a wait that ends early
when the client asking has gone."""


@dataclass(frozen=True)
class Rendered:
    """A finished output: its bytes and their content type."""

    body: bytes
    content_type: str


class _OneAtATime:
    """Refuses a second recording while one runs: both the sampler and tracemalloc are
    process-wide, and two overlapping recordings would stop each other's."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._running = False

    def __enter__(self) -> None:
        if self._running:
            raise Conflict(
                f"a {self._what} is being taken already; wait for it to finish and ask again",
                code="profile_running",
            )
        self._running = True

    def __exit__(self, *exc: object) -> None:
        self._running = False


class CpuProfiler:
    """Sampling CPU profiles of the calling thread, one at a time, as flame graphs."""

    def __init__(self, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self._interval_s = interval_s
        self._gate = _OneAtATime("CPU profile")

    async def record(self, duration_s: float, fmt: ProfileFormat, wait: Wait = asyncio.sleep) -> Rendered:
        """Samples this thread for `duration_s` (or until `wait` returns), then renders
        speedscope JSON or pyinstrument's HTML page. Conflict while another runs."""
        with self._gate:
            # "disabled": every task on the loop is sampled, not only the one asking
            # (pyinstrument's default follows the caller's async context alone).
            profiler = Profiler(interval=self._interval_s, async_mode="disabled")
            profiler.start()
            try:
                await wait(duration_s)
            finally:
                session = profiler.stop()
        # Speedscope is a viewer to zoom in: every sampled frame is kept, where
        # pyinstrument's default drops those under 1 % of the wall time, which on a
        # lightly loaded gateway (mostly waiting on sockets) is all of the router's work.
        renderer: Renderer = (
            SpeedscopeRenderer(processor_options={"filter_threshold": 0})
            if fmt == "speedscope"
            else HTMLRenderer()
        )
        # Rendering a long profile takes a while; the loop keeps serving meanwhile.
        text = await asyncio.to_thread(renderer.render, session)
        content_type = "application/json" if fmt == "speedscope" else "text/html; charset=utf-8"
        return Rendered(text.encode(), content_type)


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str


@dataclass(frozen=True)
class TaskStack:
    """One asyncio task: its name, the coroutine it runs, whether it is done, and the
    chain of frames it is suspended in, outermost first."""

    name: str
    coroutine: str
    state: str
    stack: tuple[Frame, ...]

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _awaited_frames(coro: object) -> Iterator[Frame]:
    """The frames of a suspended coroutine and of everything it awaits in turn.

    `Task.get_stack` gives a suspended coroutine's own frame only; following
    `cr_await` (and a generator's `gi_yieldfrom`) down the chain is what shows where
    the task actually waits."""
    current: object = coro
    for _ in range(_MAX_AWAIT_DEPTH):
        frame: FrameType | None = (
            getattr(current, "cr_frame", None)
            or getattr(current, "gi_frame", None)
            or getattr(current, "ag_frame", None)
        )
        if frame is None:
            return
        code = frame.f_code
        yield Frame(code.co_filename, frame.f_lineno, code.co_qualname)
        current = (
            getattr(current, "cr_await", None)
            or getattr(current, "gi_yieldfrom", None)
            or getattr(current, "ag_await", None)
        )
        if current is None:
            return


def _coroutine_name(coro: object) -> str:
    return str(getattr(coro, "__qualname__", None) or type(coro).__name__)


def task_stacks(tasks: set[asyncio.Task[Any]]) -> list[TaskStack]:
    """Each task's stack, sorted by name so two dumps compare line by line."""
    stacks = []
    for task in tasks:
        coro = task.get_coro()
        state = "cancelled" if task.cancelled() else "done" if task.done() else "pending"
        frames = tuple(_awaited_frames(coro))
        stacks.append(TaskStack(task.get_name(), _coroutine_name(coro), state, frames))
    return sorted(stacks, key=lambda s: (s.name, s.coroutine))


def tasks_text(stacks: list[TaskStack]) -> str:
    """The stacks as Python prints tracebacks, one block per task."""
    lines = [f"{len(stacks)} asyncio tasks", ""]
    for stack in stacks:
        lines.append(f"task {stack.name!r} ({stack.state}) running {stack.coroutine}")
        for frame in stack.stack:
            lines.append(f'  File "{frame.file}", line {frame.line}, in {frame.function}')
            source = linecache.getline(frame.file, frame.line).strip()
            if source:
                lines.append(f"    {source}")
        lines.append("")
    return "\n".join(lines)


@dataclass(frozen=True)
class Allocation:
    """Memory allocated at one line during the window and still alive at its end."""

    file: str
    line: int
    size_bytes: int
    count: int


@dataclass(frozen=True)
class HeapSample:
    """The top allocation sites of one window, largest first, and the total traced."""

    seconds: float
    total_bytes: int
    top: tuple[Allocation, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "total_bytes": self.total_bytes,
            "data": [asdict(a) for a in self.top],
        }

    def as_text(self) -> str:
        lines = [
            f"allocations made in the last {self.seconds:g}s and still alive: {self.total_bytes} bytes; "
            f"the top {len(self.top)} lines by size",
            "",
            f"{'bytes':>12} {'count':>8}  where",
        ]
        lines.extend(f"{a.size_bytes:>12} {a.count:>8}  {a.file}:{a.line}" for a in self.top)
        return "\n".join(lines) + "\n"


# tracemalloc's own bookkeeping and the import machinery are not the server's memory.
_NOT_OURS = (
    tracemalloc.Filter(False, tracemalloc.__file__),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
    tracemalloc.Filter(False, "<unknown>"),
)


def heap_sample(snapshot: tracemalloc.Snapshot, seconds: float, limit: int = TOP_ALLOCATIONS) -> HeapSample:
    """The `limit` lines that hold the most memory in `snapshot`, largest first, and
    the total of every line."""
    statistics = snapshot.filter_traces(_NOT_OURS).statistics("lineno")
    top = tuple(
        Allocation(stat.traceback[0].filename, stat.traceback[0].lineno, stat.size, stat.count)
        for stat in statistics[:limit]
    )
    return HeapSample(seconds, sum(stat.size for stat in statistics), top)


class HeapSampler:
    """tracemalloc over a window, one window at a time."""

    def __init__(self) -> None:
        self._gate = _OneAtATime("heap sample")

    async def record(self, duration_s: float, wait: Wait = asyncio.sleep) -> HeapSample:
        """Traces allocations for `duration_s` (or until `wait` returns) and keeps the
        top sites still alive. Tracing stops afterwards unless something else (the
        PYTHONTRACEMALLOC variable) had started it."""
        with self._gate:
            ours = not tracemalloc.is_tracing()
            if ours:
                tracemalloc.start()
            try:
                await wait(duration_s)
                snapshot = tracemalloc.take_snapshot()
            finally:
                if ours:
                    tracemalloc.stop()
        # Grouping and sorting every trace takes a while on a busy heap; not on the loop.
        return await asyncio.to_thread(heap_sample, snapshot, duration_s)

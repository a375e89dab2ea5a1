"""What debug_pprof produces, in process: a CPU profile of the loop's thread showing
the work of every task on it, one profile at a time; the tasks with the whole chain of
awaits they wait in; the allocations of a window that are still alive, largest first,
with tracing stopped afterwards."""

from __future__ import annotations

import asyncio
import tracemalloc
from typing import Any

import orjson
import pytest

from llmgw.errors import Conflict
from llmgw.obs.profiling import CpuProfiler, HeapSampler, task_stacks, tasks_text

KEPT: list[bytes] = []


def _spin_a_while() -> int:
    return sum(i * i for i in range(20_000))


async def _busy(stop: asyncio.Event) -> None:
    while not stop.is_set():
        _spin_a_while()
        await asyncio.sleep(0)


def test_a_profile_samples_every_task_on_the_loop_not_only_the_one_asking() -> None:
    async def scenario() -> bytes:
        stop = asyncio.Event()
        worker = asyncio.create_task(_busy(stop), name="busy")
        try:
            answer = await CpuProfiler().record(0.3, "speedscope")
        finally:
            stop.set()
            await worker
        assert answer.content_type == "application/json"
        return answer.body

    body = asyncio.run(asyncio.wait_for(scenario(), 30))
    profile: dict[str, Any] = orjson.loads(body)
    assert profile["$schema"].startswith("https://www.speedscope.app/")
    names = {frame["name"] for frame in profile["shared"]["frames"]}
    assert "_spin_a_while" in names


def test_the_html_page_is_pyinstruments() -> None:
    answer = asyncio.run(asyncio.wait_for(CpuProfiler().record(0.05, "html"), 30))
    assert answer.content_type.startswith("text/html")
    assert b"pyinstrument" in answer.body


def test_a_second_profile_while_one_runs_is_a_conflict() -> None:
    async def scenario() -> None:
        profiler = CpuProfiler()
        started = asyncio.Event()

        async def wait(seconds: float) -> None:
            started.set()
            await asyncio.sleep(seconds)

        first = asyncio.create_task(profiler.record(0.5, "speedscope", wait))
        await started.wait()
        with pytest.raises(Conflict, match="being taken already"):
            await profiler.record(0.1, "speedscope")
        await first
        # Once it is over, the next one may run.
        await profiler.record(0.01, "speedscope")

    asyncio.run(asyncio.wait_for(scenario(), 30))


async def _innermost(gate: asyncio.Event) -> None:
    await gate.wait()


async def _middle(gate: asyncio.Event) -> None:
    await _innermost(gate)


def test_a_task_shows_the_whole_chain_it_waits_in() -> None:
    async def scenario() -> str:
        gate = asyncio.Event()
        waiting = asyncio.create_task(_middle(gate), name="waiter")
        await asyncio.sleep(0)
        stacks = task_stacks(asyncio.all_tasks())
        gate.set()
        await waiting
        mine = next(s for s in stacks if s.name == "waiter")
        assert mine.state == "pending"
        assert mine.coroutine == "_middle"
        functions = [f.function for f in mine.stack]
        assert functions[:3] == ["_middle", "_innermost", "Event.wait"]
        assert all(f.file and f.line > 0 for f in mine.stack)
        assert orjson.loads(orjson.dumps(mine.as_json()))["stack"][0]["function"] == "_middle"
        return tasks_text(stacks)

    text = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert "task 'waiter' (pending) running _middle" in text
    assert "await _innermost(gate)" in text  # the source line under its frame


def test_a_heap_sample_keeps_the_windows_allocations_largest_first() -> None:
    async def allocate(seconds: float) -> None:
        del seconds
        KEPT.append(bytes(3_000_000))  # the line the sample must find
        await asyncio.sleep(0)

    assert not tracemalloc.is_tracing()
    try:
        sample = asyncio.run(asyncio.wait_for(HeapSampler().record(1.0, allocate), 30))
    finally:
        KEPT.clear()
    assert not tracemalloc.is_tracing()
    top = sample.top[0]
    assert top.file == __file__
    assert top.size_bytes >= 3_000_000
    assert top.count >= 1
    sizes = [a.size_bytes for a in sample.top]
    assert sizes == sorted(sizes, reverse=True)
    assert len(sizes) <= 50
    assert sample.total_bytes >= sum(sizes)
    assert sample.as_json()["data"][0] == {
        "file": __file__,
        "line": top.line,
        "size_bytes": top.size_bytes,
        "count": top.count,
    }
    assert f"{__file__}:{top.line}" in sample.as_text()

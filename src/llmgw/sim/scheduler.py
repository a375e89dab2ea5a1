"""The simulated engine's scheduler: continuous batching in virtual time, with no clock.

Requests wait first come, first served. The head of the queue is admitted while fewer
than `max_seqs` run and its KV blocks fit (see `prefix_cache`); a head that does not
fit holds back everything behind it, as a FCFS engine does. An admitted request's first
token comes after the prefill of its uncached prompt tokens; each further token comes
one decode step later, a step whose length depends on how many requests run at that
moment (see `cost`). When a request's last token is out it finishes, gives back its
blocks, and the queue is admitted again at that same instant.

With the priority policy (vLLM's `--scheduling-policy priority`) the queue is ordered
by (priority, arrival), lower values first, and a head that cannot be admitted (no
sequence slot, or its blocks do not fit) preempts the running request with the worst
priority, the latest arrived among equals, as long as that one is strictly worse. The
preempted request goes back to the queue in its place, keeps the tokens it emitted,
and on re-admission prefills its prompt and those tokens again before it continues
(vLLM's recompute preemption: nothing is lost but time). Token events already queued
for it carry the generation it was admitted in and are ignored once it has moved on.

Everything is driven by the caller's timestamps: `advance(now)` releases every token
due by `now`, each at its own simulated time, so a late caller delays delivery but never
shifts the simulated timeline. That makes the model exact under test with a fake clock,
and keeps the sim's own overhead from accumulating into the latencies it reports.
"""

from __future__ import annotations

import bisect
import enum
import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from llmgw.sim.cost import CostModel
from llmgw.sim.prefix_cache import Allocation, BlockPool, blocks_for


class JobState(enum.Enum):
    """Where a request is in its life."""

    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"
    ABORTED = "aborted"


@dataclass(eq=False, slots=True)
class Job:
    """One request as the scheduler sees it: sizes in, simulated timestamps out."""

    id: int
    prompt_tokens: int
    block_hashes: tuple[int, ...]
    output_tokens: int
    arrived_at: float
    finish_reason: str = "length"
    max_tokens_param: int | None = None
    tag: str = ""
    priority: int = 0
    """vLLM's request priority: lower is served sooner (used by the priority policy)."""
    state: JobState = JobState.WAITING
    admitted_at: float = math.nan
    first_token_at: float = math.nan
    last_token_at: float = math.nan
    finished_at: float = math.nan
    cached_tokens: int = 0
    emitted: int = 0
    slot: int = -1
    allocation: Allocation | None = field(default=None, repr=False)
    preemptions: int = 0
    # Bumped at each preemption: token events of an earlier admission are stale.
    generation: int = 0
    # When the HTTP layer handed the first and last token to the socket: how late the
    # sim delivered what it simulated (bench/sim/overhead.py reads these).
    first_write_at: float = math.nan
    last_write_at: float = math.nan

    @property
    def done(self) -> bool:
        """Finished or aborted: no more tokens will come."""
        return self.state is JobState.FINISHED or self.state is JobState.ABORTED


class SchedulerObserver(Protocol):
    """What the scheduler reports as it goes; statistics and metrics listen here."""

    def admitted(self, job: Job, at: float) -> None: ...

    def token(self, job: Job, at: float, running: int) -> None: ...

    def finished(self, job: Job, at: float) -> None: ...

    def aborted(self, job: Job, at: float) -> None: ...

    def preempted(self, job: Job, at: float) -> None: ...


class Scheduler:
    """Admission, prefill and decode timing for every request of one engine."""

    def __init__(
        self,
        *,
        max_seqs: int,
        block_size: int,
        pool: BlockPool,
        cost: CostModel,
        observer: SchedulerObserver | None = None,
        priority: bool = False,
    ) -> None:
        self.max_seqs = max_seqs
        self.priority = priority
        self.block_size = block_size
        self.pool = pool
        self.cost = cost
        self._observer = observer
        self._waiting: deque[Job] = deque()
        self._running: dict[int, Job] = {}
        # (due, tie-break, job, the job's generation when the event was queued)
        self._events: list[tuple[float, int, Job, int]] = []
        self._order = itertools.count()
        self._free_slots = list(range(max_seqs))
        # The simulated time of the last event that changed capacity (a finish or an abort).
        self._last_event_at = -math.inf
        self.preemptions = 0

    @property
    def running(self) -> int:
        """Requests admitted and not yet finished (prefilling or decoding)."""
        return len(self._running)

    @property
    def waiting(self) -> int:
        """Requests queued for admission."""
        return len(self._waiting)

    def running_jobs(self) -> list[Job]:
        """The admitted requests, oldest admission first."""
        return list(self._running.values())

    def submit(self, job: Job, now: float) -> list[Job]:
        """Queue `job` (which arrived at `job.arrived_at`, at most `now`).

        Returns the requests that progressed up to `now`. A job admitted at once counts
        as admitted when it arrived, unless capacity only freed up later: the time its
        server spent reading and tokenizing it is then part of its simulated prefill.
        """
        if job.state is not JobState.WAITING:
            raise ValueError(f"job {job.id} was already submitted")
        if job.arrived_at > now:
            raise ValueError(f"job {job.id} arrives after the time it is submitted")
        touched = self.advance(now)
        self._enqueue(job)
        self._admit(self._last_event_at)
        return touched

    def abort(self, job: Job, now: float) -> list[Job]:
        """Cancel `job` (a client went away); returns the requests that progressed."""
        touched = self.advance(now)
        if job.state is JobState.WAITING:
            self._waiting.remove(job)
        elif job.state is JobState.RUNNING:
            self._release(job)
        else:
            return touched
        job.state = JobState.ABORTED
        job.finished_at = now
        if self._observer is not None:
            self._observer.aborted(job, now)
        self._last_event_at = now
        self._admit(now)
        return touched

    def next_event_at(self) -> float | None:
        """Simulated time of the next token, or None when nothing runs."""
        events = self._events
        while events and (
            events[0][2].state is not JobState.RUNNING or events[0][3] != events[0][2].generation
        ):
            heapq.heappop(events)
        return events[0][0] if events else None

    def advance(self, now: float) -> list[Job]:
        """Release every token due by `now`, each at its own simulated time."""
        touched: list[Job] = []
        events = self._events
        observer = self._observer
        while events and events[0][0] <= now:
            at, _, job, generation = heapq.heappop(events)
            if job.state is not JobState.RUNNING or generation != job.generation:
                continue
            running = len(self._running)
            job.emitted += 1
            if job.emitted == 1:
                job.first_token_at = at
            if observer is not None:
                observer.token(job, at, running)
            job.last_token_at = at
            touched.append(job)
            if job.emitted >= job.output_tokens:
                self._finish(job, at)
            else:
                heapq.heappush(
                    events, (at + self.cost.decode_step_s(running), next(self._order), job, generation)
                )
        return touched

    def _finish(self, job: Job, at: float) -> None:
        self._release(job)
        job.state = JobState.FINISHED
        job.finished_at = at
        if self._observer is not None:
            self._observer.finished(job, at)
        self._last_event_at = at
        self._admit(at)

    def _release(self, job: Job) -> None:
        del self._running[job.id]
        if job.allocation is not None:
            self.pool.release(job.allocation)
            job.allocation = None
        heapq.heappush(self._free_slots, job.slot)

    def _enqueue(self, job: Job) -> None:
        waiting = self._waiting
        if not self.priority or not waiting or _rank(waiting[-1]) <= _rank(job):
            waiting.append(job)
        else:
            waiting.insert(bisect.bisect_right(waiting, _rank(job), key=_rank), job)

    def _admit(self, freed_at: float) -> None:
        """Admit the head of the queue while it fits (preempting worse work under the
        priority policy); capacity changed at `freed_at`."""
        while self._waiting:
            job = self._waiting[0]
            at = max(job.arrived_at, freed_at)
            allocation: Allocation | None = None
            if len(self._running) < self.max_seqs:
                total = blocks_for(job.prompt_tokens + job.output_tokens, self.block_size)
                allocation = self.pool.try_allocate(job.block_hashes, total)
            if allocation is None:
                if self.priority and self._preempt_for(job, at):
                    continue
                return
            self._waiting.popleft()
            job.state = JobState.RUNNING
            job.admitted_at = at
            job.allocation = allocation
            job.cached_tokens = allocation.hit_blocks * self.block_size
            job.slot = heapq.heappop(self._free_slots)
            self._running[job.id] = job
            if self._observer is not None:
                self._observer.admitted(job, at)
            # A resumed request recomputes what it had emitted along with its prompt.
            computed = job.prompt_tokens + job.emitted - job.cached_tokens
            first_at = at + self.cost.prefill_s(computed)
            heapq.heappush(self._events, (first_at, next(self._order), job, job.generation))

    def _preempt_for(self, head: Job, at: float) -> bool:
        """Preempt the worst running request if it is strictly worse than `head`;
        False when none is."""
        victim: Job | None = None
        for job in self._running.values():
            if victim is None or _rank(job) > _rank(victim):
                victim = job
        if victim is None or victim.priority <= head.priority:
            return False
        self._release(victim)
        victim.state = JobState.WAITING
        victim.generation += 1
        victim.preemptions += 1
        self.preemptions += 1
        self._enqueue(victim)
        if self._observer is not None:
            self._observer.preempted(victim, at)
        return True


def _rank(job: Job) -> tuple[int, float, int]:
    """Queue order under the priority policy: priority, then arrival (then id)."""
    return (job.priority, job.arrived_at, job.id)

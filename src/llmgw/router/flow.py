"""Flow control: the queues requests wait in when a model's replicas are saturated.

`FlowControl.admit` returns at once when the request's band may go now (the common,
unloaded case costs one saturation computation). Otherwise the request waits in its
model's queue for its band, bounded in count (`queue_capacity_per_band`, and
`queue_capacity_total` across bands with the lowest band's newest shed to make room)
and in time (`queue_ttl`): a request that would wait past the ttl, by its queue's
recent drain rate (see `drain`), is refused on arrival instead. Every `interval`, and
whenever a request finishes, the queues are re-checked and released highest band
first, first come first served. A waiting client that disconnects leaves its queue at
once. For a model whose replicas all preempt by priority, each band is judged against
the requests it cannot preempt, counted by band between `dispatched` and `finished` (see `admission`).

A model with no replica at all waits up to `router.activation_wait` for one to be
published, after asking the `Activator` (the control plane's seam) to start it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from llmgw.errors import BadRequest, NoCapacity
from llmgw.router.admission import (
    BandRule,
    engine_priority,
    may_admit,
    preemptive,
    priority_saturation,
    saturation,
    shed_band,
    unpreemptable,
)
from llmgw.router.drain import DrainMeter, would_outwait
from llmgw.router.endpoints import Endpoint, EndpointRegistry
from llmgw.router.metrics import Histogram
from llmgw.router.scoring import ScoringTargets
from llmgw.router.slo import SloTracker

# The drain estimate's memory, as a share of queue_ttl: long enough to hold several
# releases of a slow queue, short enough that a queue which stopped moving reads as
# stopped well within one ttl.
DRAIN_TAU_SHARE = 1 / 3


class Activator(Protocol):
    """Starts a model that has no running replica (the control plane implements it)."""

    def activate(self, model: str) -> None: ...


class NoActivator:
    """Router-only mode: nothing can be started, so waiting is only for a publication."""

    def activate(self, model: str) -> None:
        return None


@dataclass(frozen=True, slots=True)
class FlowRules:
    """`router.admission` in plain numbers."""

    enabled: bool
    bands: tuple[BandRule, ...]
    default_band: str
    queue_ttl: float
    per_band: int
    total: int
    interval: float
    activation_wait: float


@dataclass(eq=False, slots=True)
class Waiter:
    band: BandRule
    since: float
    future: asyncio.Future[None]


@dataclass(slots=True)
class ModelFlow:
    """One model's queues and the requests released from them but not yet sent."""

    queues: dict[str, deque[Waiter]] = field(default_factory=dict)
    pending: int = 0
    inflight: dict[str, int] = field(default_factory=dict)
    """Requests sent and not finished, by band: what a replica that preempts by priority
    cannot preempt for a request of the same or a lower band."""
    drain: dict[str, DrainMeter] = field(default_factory=dict)
    """How fast each band's queue has been draining, for refusing at arrival."""

    def queued(self) -> int:
        return sum(len(q) for q in self.queues.values())


@dataclass(slots=True)
class FlowCounts:
    """What admission did, by (model, band), for the metrics."""

    admitted: dict[tuple[str, str], int] = field(default_factory=dict)
    queued: dict[tuple[str, str], int] = field(default_factory=dict)
    expired: dict[tuple[str, str], int] = field(default_factory=dict)
    shed: dict[tuple[str, str], int] = field(default_factory=dict)
    waited: dict[tuple[str, str], Histogram] = field(default_factory=dict)

    def add(self, table: dict[tuple[str, str], int], model: str, band: str) -> None:
        table[(model, band)] = table.get((model, band), 0) + 1


class FlowControl:
    """Admission for every model of one gateway process."""

    def __init__(
        self,
        rules: FlowRules,
        endpoints: EndpointRegistry,
        targets: ScoringTargets,
        slo: SloTracker,
        activator: Activator | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rules = rules
        self._bands = {b.name: b for b in rules.bands}
        self._top = max(rules.bands, key=lambda b: b.priority) if rules.bands else None
        self._endpoints = endpoints
        self._targets = targets
        self._slo = slo
        # Public so the control plane, built after the gateway, can take the seam.
        self.activator: Activator = activator or NoActivator()
        self.last_asked: dict[str, float] = {}
        """When each model was last asked for (this clock): how the control plane tells an
        on-demand model in use from an idle one. One dict store per request."""
        self._clock = clock
        self._models: dict[str, ModelFlow] = {}
        self.activating: dict[str, int] = {}
        """Requests waiting for a model with no replica to get one, by model."""
        self._kick = asyncio.Event()
        self.counts = FlowCounts()

    def band(self, name: str | None) -> BandRule:
        """The band a request named, or the default; an unknown name is refused."""
        chosen = self._bands.get(name or self.rules.default_band)
        if chosen is None:
            known = ", ".join(self._bands)
            raise BadRequest(
                f"band {name!r} does not exist: use one of {known}", param="band", code="unknown_band"
            )
        return chosen

    def models(self) -> list[tuple[str, ModelFlow]]:
        return list(self._models.items())

    def queued(self, model: str) -> dict[str, int]:
        flow = self._models.get(model)
        return {} if flow is None else {band: len(q) for band, q in flow.queues.items()}

    def _flow(self, model: str) -> ModelFlow:
        flow = self._models.get(model)
        if flow is None:
            flow = self._models[model] = ModelFlow()
        return flow

    def _held_back(self, model: str, band: BandRule) -> bool:
        return band is not self._top and self._slo.breached(model, self._clock())

    def _level(self, endpoints: list[Endpoint], flow: ModelFlow, band: BandRule) -> float:
        """`band`'s saturation over `endpoints`, the model's (looked up once by the caller)."""
        if preemptive(endpoints):
            # Requests admitted but not yet sent count whatever their band: they are sent
            # within this turn of the loop, and counting them stops a burst overshooting.
            ahead = unpreemptable(band, self.rules.bands, flow.inflight) + flow.pending
            return priority_saturation(endpoints, ahead, self._targets)
        return saturation(endpoints, flow.pending, self._targets, self._clock())

    def load(self, model: str) -> tuple[float | None, int, bool]:
        """`model`'s load for scaling: its saturation over the replicas it is routed to,
        with the requests queued here counted as in flight (None: none is routed to),
        how many those are, and whether its objective is breached."""
        endpoints = self._endpoints.for_model(model)
        now = self._clock()
        breached = self._slo.breached(model, now)
        if not endpoints:
            return None, 0, breached
        flow = self._models.get(model)
        ahead = 0 if flow is None else flow.pending + flow.queued()
        return saturation(endpoints, ahead, self._targets, now), len(endpoints), breached

    def engine_priority(self, band: BandRule) -> int:
        """The request priority a priority-scheduling engine is sent for `band`."""
        return 0 if self._top is None else engine_priority(band, self._top)

    def admit_now(self, model: str, band: BandRule) -> bool:
        """Whether the request may be sent at once (the unloaded case); when not, the
        caller waits with `wait`."""
        self.last_asked[model] = self._clock()
        endpoints = self._endpoints.for_model(model)
        if not endpoints:
            return False  # even with admission off: it must wait for a replica to start
        if not self.rules.enabled:
            return True
        flow = self._flow(model)
        # any() over the deques is queued() without the count: only emptiness matters.
        if not any(flow.queues.values()) and may_admit(
            band, self._level(endpoints, flow, band), self._held_back(model, band)
        ):
            self.counts.add(self.counts.admitted, model, band.name)
            flow.pending += 1
            return True
        return False

    async def wait(self, model: str, band: BandRule) -> None:
        """Waits until the request may be sent; raises NoCapacity (503) when it waited
        past queue_ttl, was shed, found its band's queue full, or its model never got a
        replica within activation_wait."""
        if not self._endpoints.for_model(model):
            await self._await_replica(model, band)
            if self.admit_now(model, band):
                return
        await self._wait(model, self._flow(model), band)

    def dispatched(self, model: str, band: BandRule | None = None) -> None:
        """An admitted request is being sent: it now counts in its endpoint's in-flight,
        and (given its band) in its model's in-flight by band until `finished`."""
        if not self.rules.enabled:
            return
        flow = self._models.get(model)
        if flow is None:
            return
        if flow.pending > 0:
            flow.pending -= 1
        if band is not None:
            flow.inflight[band.name] = flow.inflight.get(band.name, 0) + 1

    def finished(self, model: str | None = None, band: BandRule | None = None) -> None:
        """A request finished (the band as given to `dispatched`): capacity may have
        freed, so the queues are re-checked now."""
        if model is not None and band is not None:
            flow = self._models.get(model)
            if flow is not None and flow.inflight.get(band.name, 0) > 0:
                flow.inflight[band.name] -= 1
        if self._waiting and not self._kick.is_set():
            self._kick.set()

    @property
    def _waiting(self) -> bool:
        # Asked once per finished request: emptiness only, not a count of every queue.
        return any(any(flow.queues.values()) for flow in self._models.values())

    async def _await_replica(self, model: str, band: BandRule) -> None:
        # Requests waiting for a model to start hold memory like queued ones, so they
        # count against the same total bound.
        if sum(self.activating.values()) >= self.rules.total:
            self.counts.add(self.counts.shed, model, band.name)
            raise NoCapacity(
                f"model {model!r} is starting and too many requests already wait for models to start "
                "(router.admission.queue_capacity_total); try again shortly",
                code="queue_full",
                retry_after=max(1.0, self.rules.activation_wait / 4),
            )
        self.activator.activate(model)
        wait = self.rules.activation_wait
        published = self._endpoints.published(model)
        self.activating[model] = self.activating.get(model, 0) + 1
        try:
            await asyncio.wait_for(published.wait(), wait)
        except TimeoutError:
            raise NoCapacity(
                f"model {model!r} has no replica running and none started within {wait:g}s "
                "(router.activation_wait); try again shortly",
                code="model_not_ready",
                retry_after=max(1.0, wait / 4),
            ) from None
        finally:
            left = self.activating[model] - 1
            if left:
                self.activating[model] = left
            else:
                del self.activating[model]

    def _meter(self, flow: ModelFlow, band: str) -> DrainMeter:
        meter = flow.drain.get(band)
        if meter is None:
            meter = flow.drain[band] = DrainMeter(self.rules.queue_ttl * DRAIN_TAU_SHARE)
        return meter

    async def _wait(self, model: str, flow: ModelFlow, band: BandRule) -> None:
        queue = flow.queues.setdefault(band.name, deque())
        if len(queue) >= self.rules.per_band:
            self.counts.add(self.counts.shed, model, band.name)
            raise self._refusal(
                model, band, "its band's queue is full (router.admission.queue_capacity_per_band)"
            )
        meter = self._meter(flow, band.name)
        meter.advance(self._clock(), bool(queue))
        expected = would_outwait(meter, len(queue), self.rules.queue_ttl)
        if expected is not None:
            self.counts.add(self.counts.shed, model, band.name)
            raise self._refusal(
                model,
                band,
                f"its queue would take about {expected:.0f}s to reach this request, past "
                f"router.admission.queue_ttl ({self.rules.queue_ttl:g}s)",
            )
        total = sum(f.queued() for f in self._models.values())
        if total >= self.rules.total:
            victim_band = shed_band(
                {b: sum(len(f.queues.get(b, ())) for f in self._models.values()) for b in self._bands},
                self.rules.bands,
                band,
                total,
                self.rules.total,
            )
            if victim_band is None:
                self.counts.add(self.counts.shed, model, band.name)
                raise self._refusal(
                    model, band, "every queue is full (router.admission.queue_capacity_total)"
                )
            self._shed_newest(victim_band)
        waiter = Waiter(band, self._clock(), asyncio.get_running_loop().create_future())
        queue.append(waiter)
        self._kick.set()  # the loop idles while nothing waits
        self.counts.add(self.counts.queued, model, band.name)
        try:
            await waiter.future
        except asyncio.CancelledError:
            # The client left (or the request was cancelled): out of the queue at once.
            if waiter in queue:
                queue.remove(waiter)
            elif waiter.future.done() and not waiter.future.cancelled() and waiter.future.exception() is None:
                flow.pending = max(0, flow.pending - 1)
            raise
        waited = self.counts.waited.get((model, band.name))
        if waited is None:
            waited = self.counts.waited[(model, band.name)] = Histogram()
        waited.observe(self._clock() - waiter.since)

    def _refusal(self, model: str, band: BandRule, why: str) -> NoCapacity:
        return NoCapacity(
            f"model {model!r} is saturated and {why}; try again shortly",
            code="queue_full",
            retry_after=max(1.0, self.rules.queue_ttl / 4),
        )

    def _shed_newest(self, band_name: str) -> None:
        """Turns away the newest waiter of `band_name` across models. A waiter whose
        client left in this same turn is dropped on the way (it has left already)."""
        while True:
            newest: tuple[str, Waiter] | None = None
            for model, flow in self._models.items():
                queue = flow.queues.get(band_name)
                if queue and (newest is None or queue[-1].since >= newest[1].since):
                    newest = (model, queue[-1])
            if newest is None:
                return
            model, waiter = newest
            self._models[model].queues[band_name].pop()
            if waiter.future.done():
                continue
            self.counts.add(self.counts.shed, model, band_name)
            waiter.future.set_exception(
                self._refusal(model, waiter.band, "a request of a higher band needed its place in the queue")
            )
            return

    def _trim(self, model: str, flow: ModelFlow, band: BandRule, queue: deque[Waiter], now: float) -> None:
        """Refuses now, newest first, the waiters behind the head that the queue's drain
        rate says will not be reached within queue_ttl: they were queued before the
        rate was known, and waiting out the ttl would only delay the same 503."""
        meter = self._meter(flow, band.name)
        meter.advance(now, True)
        ttl = self.rules.queue_ttl
        while len(queue) > 1:
            tail = queue[-1]
            if tail.future.done():
                queue.pop()  # its client left in this same turn
                continue
            expected = would_outwait(meter, len(queue) - 1, ttl - (now - tail.since))
            if expected is None:
                return
            queue.pop()
            self.counts.add(self.counts.shed, model, band.name)
            tail.future.set_exception(
                self._refusal(
                    model,
                    band,
                    f"its queue would take about {expected:.0f}s more to reach this request, past "
                    f"router.admission.queue_ttl ({ttl:g}s)",
                )
            )

    def release(self) -> int:
        """Lets waiting requests go where their band allows, expires those past
        queue_ttl; returns how many were let go."""
        now = self._clock()
        released = 0
        for model, flow in self._models.items():
            if not flow.queued():
                continue
            endpoints = self._endpoints.for_model(model)
            for band in sorted(self.rules.bands, key=lambda b: -b.priority):
                queue = flow.queues.get(band.name)
                while queue and (queue[0].future.done() or now - queue[0].since >= self.rules.queue_ttl):
                    waiter = queue.popleft()
                    if waiter.future.done():
                        continue  # its client left in this same turn
                    self.counts.add(self.counts.expired, model, band.name)
                    waiter.future.set_exception(
                        NoCapacity(
                            f"model {model!r} stayed saturated for {self.rules.queue_ttl:g}s "
                            "(router.admission.queue_ttl); try again shortly",
                            code="queue_timeout",
                            retry_after=max(1.0, self.rules.queue_ttl / 4),
                        )
                    )
                if queue:
                    self._trim(model, flow, band, queue, now)
            for band in sorted(self.rules.bands, key=lambda b: -b.priority):
                queue = flow.queues.get(band.name)
                meter = flow.drain.get(band.name) if queue else None
                while queue and may_admit(
                    band, self._level(endpoints, flow, band), self._held_back(model, band)
                ):
                    waiter = queue.popleft()
                    if waiter.future.done():
                        continue  # its client left in this same turn
                    flow.pending += 1
                    self.counts.add(self.counts.admitted, model, band.name)
                    if meter is not None:
                        meter.release()
                    waiter.future.set_result(None)
                    released += 1
                if queue:
                    break  # FCFS across bands too: a lower band never overtakes a waiting higher one
        return released

    async def run(self) -> None:
        """Re-checks the queues every interval while anything waits, and at once when a
        request finishes; idles while nothing does."""
        while True:
            if not self._waiting:
                await self._kick.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._kick.wait(), self.rules.interval)
            self._kick.clear()
            self.release()

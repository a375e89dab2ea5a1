"""What one running sim server holds: its engine, its fault, its readiness, its ports.

Built once at start and stored on the aiohttp application; handlers reach it through
`SIM_STATE`. Nothing here is module-level, so a test can run several sims in one process.
The two things that reach outside the process (closing the listening socket, and
exiting) are injected: the runner gives the real ones, in-process tests give fakes.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import web

from llmgw.sim.engine import Clock, SimEngine
from llmgw.sim.faults import FaultSetting, FaultState
from llmgw.sim.lora import LoraSlots
from llmgw.sim.options import FaultMode, SimOptions
from llmgw.sim.quality import Quality, QualityState

# Exit status of a sim that exits on purpose (the exit-after fault), so a supervisor
# can tell it from a crash (1) or a clean stop (0).
FAULT_EXIT_STATUS = 3


class Listener(Protocol):
    """The main listening socket, which the refuse fault closes and reopens."""

    @property
    def is_open(self) -> bool: ...

    async def close(self) -> None: ...

    async def open(self) -> None: ...


@dataclass
class SimState:
    """Everything the handlers of one sim server share."""

    options: SimOptions
    engine: SimEngine
    faults: FaultState
    quality: QualityState
    ready_at: float
    exit_process: Callable[[int], None]
    clock: Clock = time.perf_counter
    created: int = field(default_factory=lambda: int(time.time()))
    listener: Listener | None = None
    last_traceparent: str = ""
    """The W3C `traceparent` of the last POST to the engine's API (empty without one):
    how a test sees that a gateway passed its trace on (`GET /sim/state`)."""
    loras: LoraSlots = field(default_factory=lambda: LoraSlots(0))
    _response_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @classmethod
    def build(
        cls,
        options: SimOptions,
        *,
        clock: Clock = time.perf_counter,
        exit_process: Callable[[int], None],
    ) -> SimState:
        """State for a server starting now."""
        now = clock()
        setting = FaultSetting(
            mode=options.fault, after=options.fault_after, stream_tokens=options.fault_stream_tokens
        )
        return cls(
            options=options,
            engine=SimEngine(options, clock),
            faults=FaultState(setting, now),
            quality=QualityState(Quality(options.error_rate, options.ttft_factor)),
            ready_at=now + options.startup_delay_s,
            exit_process=exit_process,
            clock=clock,
            loras=LoraSlots(options.max_loras),
        )

    def ready(self) -> bool:
        """Whether the startup delay is over."""
        return self.clock() >= self.ready_at

    def response_id(self, prefix: str) -> str:
        """A response id unique in this server and reproducible for a given seed."""
        return f"{prefix}-{self.options.seed & 0xFFFFFFFF:08x}{next(self._response_ids):024x}"

    def served_names(self) -> tuple[str, ...]:
        """Every name a request may ask for: the models and their adapters."""
        return self.options.models + self.options.adapters + tuple(self.loras.held)

    def refusing(self) -> bool:
        """Whether the refuse fault is in force."""
        return self.faults.mode(self.clock()) is FaultMode.REFUSE


SIM_STATE = web.AppKey("sim_state", SimState)

"""The fault a sim engine shows, and which requests it applies to.

A fault is chosen explicitly (command line or `POST /sim/fault`), never drawn at random:
a test says "from the third request on, answer 503" and gets exactly that. The first
`after` generation requests counted since the fault was set are served normally; every
later one gets the fault. A fault may also last `duration_s` and then lapse back to
none, which is how a test brings back a replica whose port it closed.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from llmgw.sim.options import FaultMode

# The statuses a status fault answers with, and the error type OpenAI uses for each.
STATUS_FAULTS: dict[FaultMode, tuple[int, str]] = {
    FaultMode.HTTP_500: (500, "InternalServerError"),
    FaultMode.HTTP_503: (503, "ServiceUnavailableError"),
    FaultMode.HTTP_429: (429, "RateLimitError"),
}


class Action(enum.Enum):
    """What the HTTP layer does with one generation request."""

    SERVE = "serve"
    STATUS = "status"
    HANG_HEADERS = "hang-headers"
    HANG_STREAM = "hang-stream"
    CUT_STREAM = "cut-stream"
    EXIT = "exit"
    REFUSE = "refuse"  # the port is closed; a request that still arrives is dropped


@dataclass(frozen=True, slots=True)
class FaultSetting:
    """A fault as set: its mode, how many requests pass first, and for how long it holds."""

    mode: FaultMode = FaultMode.NONE
    after: int = 0
    stream_tokens: int = 1
    duration_s: float | None = None

    def describe(self) -> dict[str, object]:
        """The setting as the admin API shows it."""
        return {
            "mode": self.mode.value,
            "after": self.after,
            "stream_tokens": self.stream_tokens,
            "duration_s": self.duration_s,
        }


class FaultState:
    """The current fault and the count of generation requests since it was set."""

    def __init__(self, setting: FaultSetting, now: float) -> None:
        self.setting = setting
        self.since = now
        self.seen = 0
        self.served = 0

    def set(self, setting: FaultSetting, now: float) -> None:
        """Switch to `setting`; its `after` counts from this moment."""
        self.setting = setting
        self.since = now
        self.seen = 0
        self.served = 0

    @property
    def expires_at(self) -> float:
        """When the current fault lapses (infinity if it does not)."""
        if self.setting.duration_s is None:
            return math.inf
        return self.since + self.setting.duration_s

    def mode(self, now: float) -> FaultMode:
        """The mode in force at `now`, after any lapse."""
        if self.setting.mode is not FaultMode.NONE and now >= self.expires_at:
            self.set(FaultSetting(), now)
        return self.setting.mode

    def on_request(self, now: float) -> Action:
        """Count one generation request and say what to do with it."""
        mode = self.mode(now)
        self.seen += 1
        if mode is FaultMode.NONE or self.seen <= self.setting.after:
            return Action.SERVE
        if mode in STATUS_FAULTS:
            return Action.STATUS
        return {
            FaultMode.HANG_HEADERS: Action.HANG_HEADERS,
            FaultMode.HANG_STREAM: Action.HANG_STREAM,
            FaultMode.CUT_STREAM: Action.CUT_STREAM,
            FaultMode.EXIT_AFTER: Action.EXIT,
            FaultMode.REFUSE: Action.REFUSE,
        }[mode]

    def on_served(self, now: float) -> bool:
        """Count one answered request; True when an exit-after fault's quota is now used up."""
        self.served += 1
        return self.mode(now) is FaultMode.EXIT_AFTER and self.served >= self.setting.after

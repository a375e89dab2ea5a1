"""Scaling on load: how many replicas a model should have between its floor and ceiling,
from how saturated its serving replicas are as the router sees them.

One step per reconcile pass, per model. The reading is the router's saturation level
(`llmgw.router.admission.saturation`: in-flight against `router.scoring.target_inflight`,
the replicas' queues and KV-cache use against their targets, 1.0 being "at target"),
with the requests queued at the gateway counted as in flight, and whether the model
breaches its TTFT/TPOT objective.

- Up by one when the model has been hot (level at or above `up_at`, or its objective
  breached) for `up_after` without a break, below the ceiling, and no replica is still
  starting: a replica that is loading is not in the reading yet, so the reading that
  asked for it is not trusted again until it serves (never faster than startup).
- Down by one when the load would fit in one replica fewer (level x n / (n - 1) at or
  below `down_at`) for `down_after` without a break, above the floor.

`down_at` below `up_at` is the hysteresis: after a step down the level is at most
`down_at`, so it is not hot; after a step up the timers start again. The plan then stops
the surplus newest first, draining it as for any scale-down.

Pure: the time and the reading are passed in; the state is handed back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ScalePolicy:
    """`control.scale_*`, in plain numbers: levels (1.0 = at target) and seconds."""

    up_at: float = 1.0
    up_after: float = 30.0
    down_at: float = 0.6
    down_after: float = 300.0


@dataclass(frozen=True, slots=True)
class LoadReading:
    """One model's load now: its saturation level over the `ready` replicas the router
    routes to (None: no reading, e.g. none serves), whether its objective is breached,
    and how many replicas are still starting (ordered or loading)."""

    level: float | None
    ready: int
    starting: int = 0
    slo_breached: bool = False


@dataclass(frozen=True, slots=True)
class ScaleState:
    """What one model's scaling remembers between passes: the count it holds the model
    at, since when it has been hot, and since when its load would fit in one fewer."""

    target: int
    hot_since: float | None = None
    cool_since: float | None = None


@dataclass(frozen=True, slots=True)
class ScaleStep:
    """A step's outcome: the state to keep and a sentence for `ctl explain`."""

    state: ScaleState
    why: str
    changed: int = 0
    """+1 or -1 when this step moved the target, else 0."""


def scale_step(
    state: ScaleState | None,
    reading: LoadReading,
    *,
    floor: int,
    ceiling: int,
    now: float,
    policy: ScalePolicy,
) -> ScaleStep | None:
    """The next state of a model's load scaling; None when it has no room to scale
    (ceiling 0, or a ceiling of one replica or fewer), and then nothing is remembered."""
    low = max(floor, 1)
    if ceiling <= low:
        return None
    live = reading.ready + reading.starting
    start = state.target if state is not None else live
    target = min(max(start, low), ceiling)
    level = reading.level
    if level is None or reading.ready == 0 or not math.isfinite(level):
        return ScaleStep(ScaleState(target), f"load scaling holds {target} (no load reading: none serves)")
    hot = level >= policy.up_at or reading.slo_breached
    n = reading.ready
    after_one_fewer = level * n / (n - 1) if n > 1 else math.inf
    fits = after_one_fewer <= policy.down_at
    # A starting replica is not in the reading: hot time counts only once it serves.
    hot_since = (state.hot_since if state and state.hot_since is not None else now) if hot else None
    if reading.starting > 0:
        hot_since = None
    cool_since = (state.cool_since if state and state.cool_since is not None else now) if fits else None
    figures = (
        f"level {level:.2f} over {n} ready"
        + (f", {reading.starting} starting" if reading.starting else "")
        + (", objective breached" if reading.slo_breached else "")
        + f"; up at {policy.up_at:.2f} for {policy.up_after:.0f}s,"
        f" down when one fewer would be at or below {policy.down_at:.2f} for {policy.down_after:.0f}s"
    )
    if hot_since is not None and now - hot_since >= policy.up_after and target < ceiling and n >= target:
        return ScaleStep(
            ScaleState(target + 1),
            f"load scaling: up to {target + 1} (saturated for {now - hot_since:.0f}s; {figures})",
            changed=1,
        )
    if (
        cool_since is not None
        and now - cool_since >= policy.down_after
        and target > low
        and reading.starting == 0
    ):
        return ScaleStep(
            ScaleState(target - 1),
            f"load scaling: down to {target - 1} (one fewer would be at {after_one_fewer:.2f}"
            f" for {now - cool_since:.0f}s; {figures})",
            changed=-1,
        )
    if hot_since is not None:
        state_word = f"saturated for {now - hot_since:.0f}s"
        if target >= ceiling:
            state_word += f", at the ceiling of {ceiling}"
    elif hot:
        state_word = "saturated, waiting for a starting replica to serve"
    elif cool_since is not None:
        state_word = f"one fewer would be at {after_one_fewer:.2f} for {now - cool_since:.0f}s"
        if target <= low:
            state_word += f", at the floor of {low}"
    else:
        state_word = "within its band"
    return ScaleStep(
        ScaleState(target, hot_since, cool_since), f"load scaling holds {target} ({state_word}; {figures})"
    )

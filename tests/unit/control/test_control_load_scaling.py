"""Scaling on load (`load_scaling.scale_step`): one more replica after a sustained
saturation, one fewer after the load has long fit in fewer, never past the bounds, never
again before a starting replica serves, and no flapping under noisy load."""

from __future__ import annotations

from control_world import NOW, UTC_ZONE, catalog, gpu_profile, model
from hypothesis import given, settings
from hypothesis import strategies as st

from llmgw.catalog import Model
from llmgw.control.decisions.cluster import ModelDemand
from llmgw.control.decisions.desired import desired
from llmgw.control.decisions.load_scaling import LoadReading, ScalePolicy, ScaleState, scale_step

POLICY = ScalePolicy(up_at=1.0, up_after=30.0, down_at=0.6, down_after=300.0)


def run(
    levels: list[float], *, ready: int, floor: int = 1, ceiling: int = 3, every: float = 5.0
) -> tuple[ScaleState | None, list[int]]:
    """Steps through `levels`, one per `every` seconds, the replicas all serving at once."""
    state: ScaleState | None = None
    changes: list[int] = []
    for i, level in enumerate(levels):
        step = scale_step(
            state, LoadReading(level, ready), floor=floor, ceiling=ceiling, now=NOW + i * every, policy=POLICY
        )
        assert step is not None
        state = step.state
        changes.append(step.changed)
        ready = state.target
    return state, changes


def test_one_more_replica_after_a_sustained_saturation_and_not_before() -> None:
    # Saturated from t=0; 30 s later (the 7th pass, 5 s apart) one more is wanted.
    state, changes = run([1.5] * 6, ready=1)
    assert state is not None
    assert state.target == 1
    assert changes == [0] * 6
    state, changes = run([1.5] * 7, ready=1)
    assert state is not None
    assert state.target == 2
    assert changes[-1] == 1


def test_a_break_in_the_saturation_starts_the_wait_again() -> None:
    state, _ = run([1.5] * 5 + [0.9] + [1.5] * 6, ready=1)
    assert state is not None
    assert state.target == 1


def test_nothing_more_while_a_replica_starts_and_the_wait_restarts_once_it_serves() -> None:
    state = ScaleState(2)
    step = None
    for i in range(20):  # 100 s saturated, the second replica still loading
        step = scale_step(
            state, LoadReading(2.0, 1, starting=1), floor=1, ceiling=3, now=NOW + i * 5, policy=POLICY
        )
        assert step is not None
        assert step.changed == 0
        state = step.state
    assert step is not None
    assert "waiting for a starting replica" in step.why
    serving = scale_step(state, LoadReading(2.0, 2), floor=1, ceiling=3, now=NOW + 100, policy=POLICY)
    assert serving is not None
    assert serving.changed == 0
    assert serving.state.hot_since == NOW + 100


def test_one_fewer_after_the_load_long_fits_in_fewer() -> None:
    # 0.25 on 2 replicas is 0.5 on one: at or below 0.6 for 300 s, then down to 1.
    state, changes = run([0.25] * 60, ready=2)
    assert state is not None
    assert state.target == 2
    assert sum(changes) == 0
    state, changes = run([0.25] * 61, ready=2)
    assert state is not None
    assert state.target == 1
    assert changes[-1] == -1


def test_load_that_would_not_fit_in_fewer_keeps_the_count() -> None:
    # 0.4 on 2 is 0.8 on one: above 0.6, so both stay however long.
    state, changes = run([0.4] * 200, ready=2)
    assert state is not None
    assert state.target == 2
    assert not any(changes)


def test_the_ceiling_and_the_floor_hold() -> None:
    state, _ = run([5.0] * 200, ready=1, ceiling=3)
    assert state is not None
    assert state.target == 3
    state, _ = run([0.0] * 400, ready=3, floor=2, ceiling=3)
    assert state is not None
    assert state.target == 2


def test_a_breached_objective_counts_as_saturated() -> None:
    state: ScaleState | None = None
    step = None
    for i in range(7):
        step = scale_step(
            state, LoadReading(0.5, 1, slo_breached=True), floor=1, ceiling=2, now=NOW + i * 5, policy=POLICY
        )
        assert step is not None
        state = step.state
    assert step is not None
    assert step.changed == 1
    assert "objective breached" in step.why


def test_no_room_to_scale_is_no_load_scaling() -> None:
    assert scale_step(None, LoadReading(3.0, 2), floor=2, ceiling=2, now=NOW, policy=POLICY) is None
    assert scale_step(None, LoadReading(3.0, 1), floor=0, ceiling=1, now=NOW, policy=POLICY) is None
    assert scale_step(None, LoadReading(3.0, 0), floor=0, ceiling=0, now=NOW, policy=POLICY) is None


def test_without_a_reading_the_count_is_held() -> None:
    step = scale_step(ScaleState(2), LoadReading(None, 0), floor=1, ceiling=3, now=NOW, policy=POLICY)
    assert step is not None
    assert step.state == ScaleState(2)
    assert "no load reading" in step.why


def test_the_explanation_gives_the_figures() -> None:
    _, _ = run([1.5] * 2, ready=1)
    step = scale_step(
        ScaleState(1, hot_since=NOW - 10), LoadReading(1.25, 1), floor=1, ceiling=3, now=NOW, policy=POLICY
    )
    assert step is not None
    assert "level 1.25 over 1 ready" in step.why
    assert "saturated for 10s" in step.why
    assert "up at 1.00 for 30s" in step.why


@settings(max_examples=200, deadline=None)
@given(
    demand=st.floats(0.0, 5.0),
    spells=st.lists(st.tuples(st.floats(-0.1, 0.1), st.integers(1, 100)), min_size=1, max_size=12),
    floor=st.integers(0, 3),
    extra=st.integers(1, 4),
    startup=st.integers(0, 12),
)
def test_noisy_steady_load_never_flaps_and_the_bounds_hold(
    demand: float, spells: list[tuple[float, int]], floor: int, extra: int, startup: int
) -> None:
    """A steady demand (in replicas' worth of load) read with noise of up to ±0.1, in
    spells of one error held for a while (the worst case for a timer): the count only
    ever moves one way, and stays within [max(floor, 1), ceiling]. A new replica takes
    `startup` passes to serve."""
    noise = [wobble for wobble, length in spells for _ in range(length)]
    ceiling = max(floor, 1) + extra
    state: ScaleState | None = None
    ready, starting, ready_at = max(floor, 1), 0, 0
    moves: set[int] = set()
    for i, wobble in enumerate(noise):
        if starting and i >= ready_at:
            ready, starting = ready + starting, 0
        level = max(demand / ready + wobble, 0.0)
        step = scale_step(
            state,
            LoadReading(level, ready, starting),
            floor=floor,
            ceiling=ceiling,
            now=NOW + i * 5.0,
            policy=POLICY,
        )
        assert step is not None
        state = step.state
        assert max(floor, 1) <= state.target <= ceiling
        if step.changed:
            moves.add(step.changed)
        if step.changed == 1:
            starting, ready_at = 1, i + startup
        elif step.changed == -1:
            ready -= 1
    assert len(moves) <= 1


def with_load(target: int, why: str = "load scaling holds") -> ModelDemand:
    return ModelDemand(last_request_at=NOW, load_target=target, load_why=why)


def one(**fields: object) -> Model:
    first: Model = catalog(model("m", gpu_profile(), **fields)).models()[0]
    return first


def test_desired_holds_the_model_at_load_scalings_count_within_its_bounds() -> None:
    d = desired(one(min=1, max=3), with_load(2, "load scaling: up to 2 (level 1.40)"), NOW, UTC_ZONE)
    assert (d.floor, d.ceiling) == (2, 2)
    assert "min 1, max 3" in d.why
    assert "level 1.40" in d.why
    # A count past the bounds (the scaling changed since) is brought within them.
    d = desired(one(min=1, max=3), with_load(5), NOW, UTC_ZONE)
    assert (d.floor, d.ceiling) == (3, 3)


def test_an_on_demand_model_held_at_one_still_stops_when_idle() -> None:
    m = one(min=0, max=3, scaling={"idle_timeout": "10m"})
    d = desired(m, with_load(1), NOW, UTC_ZONE)
    assert (d.floor, d.ceiling) == (0, 1)
    idle = desired(m, ModelDemand(last_request_at=NOW - 3600, load_target=2), NOW, UTC_ZONE)
    assert (idle.floor, idle.ceiling, idle.surplus_reason) == (0, 0, "idle")

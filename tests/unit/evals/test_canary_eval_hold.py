"""A canary candidate that failed its eval gate gets no requests until an eval passes;
a canary reset does not lift the hold, a catalog change keeps it."""

from __future__ import annotations

from llmgw.catalog import Catalog, Model
from llmgw.router.canary import Canaries, explain_lines


def _catalog(percent: int = 50) -> Catalog:
    return Catalog.build(
        [Model(name="m", canary={"model": "m-next", "percent": percent}), Model(name="m-next")],
        served_statically=("m", "m-next"),
    )


def _sent(canaries: Canaries, n: int = 10) -> int:
    return sum(canaries.choose("m", None) is not None for _ in range(n))


def test_a_failed_eval_holds_the_candidate_until_one_passes() -> None:
    canaries = Canaries(_catalog())
    assert _sent(canaries) == 5
    canaries.eval_result("m-next", False, "score 0.50 on arithmetic under min_score 0.9")
    assert _sent(canaries) == 0
    described = canaries.describe("m")
    assert described is not None
    assert described["state"] == "eval_failed"
    assert described["percent_in_force"] == 0
    assert (
        "m-next failed its eval gate (score 0.50 on arithmetic under min_score 0.9): it gets no "
        "requests until an eval passes"
    ) in explain_lines(described)
    canaries.reset("m")
    assert _sent(canaries) == 0
    canaries.replace(_catalog(20))  # a new canary: still the same candidate, still held
    assert _sent(canaries) == 0
    canaries.eval_result("m-next", True, "")
    assert _sent(canaries) == 2
    described = canaries.describe("m")
    assert described is not None
    assert described["state"] == "running"


def test_the_models_own_result_holds_nothing() -> None:
    canaries = Canaries(_catalog())
    canaries.eval_result("m", False, "score 0")
    assert _sent(canaries) == 5

"""The pure steps of a weights update (llmgw.catalog.lifecycle): what update, promote and
rollback write and drop, and the one sentence each refuses with."""

from __future__ import annotations

from typing import Any

import pytest

from llmgw.catalog import Catalog, Model
from llmgw.catalog.lifecycle import LifecycleError, promote, rollback, update


def _model(**fields: Any) -> Model:
    base: dict[str, Any] = {
        "name": "chat",
        "source": "sim/v1",
        "profiles": [{"name": "sim", "engine": "sim"}],
        "scaling": {"min": 2},
        **fields,
    }
    return Model.model_validate(base)


def test_update_adds_a_candidate_at_the_new_source_as_the_canary() -> None:
    changed = update(_model(aliases=["c"]), "sim/v2", "abc123", 10)
    model, candidate = changed.write
    assert model.canary is not None
    assert (model.canary.model, model.canary.percent) == ("chat@candidate", 10)
    assert (candidate.name, candidate.source, candidate.aliases) == ("chat@candidate", "sim/v2", ())
    assert candidate.origin is not None
    assert candidate.origin.revision == "abc123"
    Catalog.build(list(changed.write))  # the pair is a valid catalog


def test_promote_keeps_the_old_source_in_origin_previous_and_drops_the_candidate() -> None:
    model, candidate = update(_model(origin={"repo": "o/chat", "revision": "r1"}), "sim/v2", "r2", 10).write
    changed = promote(model, candidate, None)
    (promoted,) = changed.write
    assert changed.drop == ("chat@candidate",)
    assert promoted.source == "sim/v2"
    assert promoted.canary is None
    assert promoted.origin is not None
    assert (promoted.origin.repo, promoted.origin.revision) == ("o/chat", "r2")
    assert promoted.origin.previous is not None
    assert (promoted.origin.previous.source, promoted.origin.previous.revision) == ("sim/v1", "r1")


def test_rollback_returns_to_previous_once() -> None:
    model, candidate = update(_model(), "sim/v2", "", 10).write
    (promoted,) = promote(model, candidate, None).write
    (back,) = rollback(promoted).write
    assert back.source == "sim/v1"
    with pytest.raises(LifecycleError, match="no previous source"):
        rollback(back)


def test_promote_without_a_candidate_is_refused() -> None:
    with pytest.raises(LifecycleError, match="no candidate to promote"):
        promote(_model(), None, None)


@pytest.mark.parametrize(("passed", "why"), [(None, "has no eval result"), (False, "failed its eval")])
def test_promote_is_held_by_the_eval_gate(passed: bool | None, why: str) -> None:
    model, candidate = update(_model(eval={"suite": "arithmetic"}), "sim/v2", "", 10).write
    with pytest.raises(LifecycleError, match=why):
        promote(model, candidate, passed)
    assert promote(model, candidate, True).write[0].source == "sim/v2"


def test_update_to_the_source_in_force_is_refused() -> None:
    with pytest.raises(LifecycleError, match="serves sim/v1 already"):
        update(_model(), "sim/v1", "", 10)


def test_update_beside_another_canary_is_refused() -> None:
    with pytest.raises(LifecycleError, match='has canary "other" already'):
        update(_model(canary={"model": "other", "percent": 5}), "sim/v2", "", 10)

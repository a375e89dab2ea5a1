"""SimOptions: defaults are valid, and each refusal names the field and the fix."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from llmgw.core.problems import describe_validation_error
from llmgw.sim.cost import CostModel
from llmgw.sim.options import FaultMode, Flavor, SimOptions


def problems(**fields: object) -> str:
    with pytest.raises(ValidationError) as caught:
        SimOptions(**fields)
    return "\n".join(describe_validation_error(caught.value, SimOptions))


def test_the_defaults_are_a_valid_vllm_sim() -> None:
    options = SimOptions()
    assert options.flavor is Flavor.VLLM
    assert options.fault is FaultMode.NONE
    assert options.served_model == "sim-model"


def test_a_kv_cache_smaller_than_one_sequence_is_refused_with_the_size_needed() -> None:
    text = problems(kv_blocks=10, max_model_len=1024, block_size=16)
    assert "kv_blocks" in text
    assert "at least 64" in text


def test_an_adapter_named_like_a_model_is_refused() -> None:
    assert "adapters" in problems(models=("a",), adapters=("a",))


def test_no_model_is_refused() -> None:
    assert "--model" in problems(models=())


def test_an_unknown_option_is_refused_with_the_nearest_name() -> None:
    assert "did you mean max_seqs" in problems(max_seq=3)


@pytest.mark.parametrize("field", ["max_seqs", "block_size", "time_scale"])
def test_non_positive_sizes_are_refused(field: str) -> None:
    assert field in problems(**{field: 0})


def test_cost_model_formulas() -> None:
    cost = CostModel(prefill_ms_per_token=0.5, decode_ms=10.0, decode_ms_per_seq=2.0, time_scale=0.1)
    assert cost.prefill_s(100) == pytest.approx(0.005)
    assert cost.decode_step_s(5) == pytest.approx(0.002)

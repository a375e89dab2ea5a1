"""A replica started with vLLM's `--scheduling-policy priority` is published as
priority-scheduling, and a follower reading the replica table sees the same."""

from __future__ import annotations

import pytest

from llmgw.control.publish import SCHEDULING_LABEL, schedules_by_priority
from llmgw.control.replica_table import StoredReplica
from llmgw.router.endpoints import EndpointSpec


@pytest.mark.parametrize(
    ("engine", "args", "expected"),
    [
        pytest.param("vllm", ("--scheduling-policy", "priority"), True, id="vllm-two-words"),
        pytest.param(
            "vllm", ("--max-num-seqs", "64", "--scheduling-policy=priority"), True, id="vllm-equals"
        ),
        pytest.param("sim", ("--scheduling-policy", "priority"), True, id="sim"),
        pytest.param("vllm", ("--scheduling-policy", "fcfs"), False, id="fcfs"),
        pytest.param("vllm", ("--scheduling-policy",), False, id="no-value"),
        pytest.param("vllm", (), False, id="default"),
        pytest.param("sglang", ("--scheduling-policy", "priority"), False, id="not-vllms-priority"),
    ],
)
def test_the_engine_args_say_whether_it_schedules_by_priority(
    engine: str, args: tuple[str, ...], expected: bool
) -> None:
    assert schedules_by_priority(engine, args) is expected


@pytest.mark.parametrize("priority", [True, False])
def test_a_follower_reads_the_flag_back_from_the_stored_labels(priority: bool) -> None:
    labels = {"node": "n1", **({SCHEDULING_LABEL: "priority"} if priority else {})}
    spec = EndpointSpec(
        id="r1", url="http://10.0.0.1:8000", models=("m",), engine="vllm", labels=labels,
        priority_scheduling=priority,
    )  # fmt: skip
    assert StoredReplica.of(spec, term=1, updated_at=0.0).spec("key") == EndpointSpec(
        id="r1", url="http://10.0.0.1:8000", models=("m",), engine="vllm", api_key="key", pool="",
        labels=labels, priority_scheduling=priority,
    )  # fmt: skip

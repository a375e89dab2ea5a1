"""A replica started with vLLM's `--scheduling-policy priority` is published as
priority-scheduling, and a follower reading the replica table sees the same."""

from __future__ import annotations

import pytest
from control_world import catalog, cpu_profile, model

from llmgw.control.decisions.cluster import Assignment
from llmgw.control.decisions.publish import (
    LORA_LABEL,
    SCHEDULING_LABEL,
    lora_ids_of,
    replica_spec,
    schedules_by_priority,
)
from llmgw.control.decisions.replicas import Part, ReplicaRecord
from llmgw.control.tables.replica_table import StoredReplica
from llmgw.engines.llamacpp import adapter_ids
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


# --- llama-server adapters, by number ------------------------------------------------------


def _llamacpp_record(model: str) -> ReplicaRecord:
    return ReplicaRecord(
        id=f"{model}-1",
        model=model,
        profile="cpu",
        parts=[Part(Assignment(node_id="n1", cpu_cores=(0, 1, 2, 3)))],
        since=0.0,
    )


def test_a_llamacpp_replica_is_published_with_its_adapters_numbers() -> None:
    adapters = [{"name": "sql", "source": "/a/sql.gguf"}, {"name": "legal", "source": "/a/legal.gguf"}]
    cat = catalog(model("small", cpu_profile(), adapters=adapters), model("plain", cpu_profile()))
    spec = replica_spec(_llamacpp_record("small"), cat, "key")
    # The numbers llama-server gives them: their order in --lora, which is the catalog's.
    assert spec.lora_ids == {"sql": 0, "legal": 1}
    assert spec.lora_ids == adapter_ids(cat.resolve("small").engine_profile("cpu"))
    # A follower reads them back from the stored labels.
    assert StoredReplica.of(spec, term=1, updated_at=0.0).spec("key").lora_ids == {"sql": 0, "legal": 1}
    assert replica_spec(_llamacpp_record("plain"), cat, "key").lora_ids == {}


@pytest.mark.parametrize("label", ["", "not json", "[1, 2]", '{"sql": "zero"}'])
def test_unreadable_adapter_labels_are_no_adapters(label: str) -> None:
    assert lora_ids_of({LORA_LABEL: label}) == {}

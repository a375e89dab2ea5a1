"""The agent protocol's messages: each survives the wire, a profile crosses it whole,
and a frame that is not a message is refused with the field named."""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmgw.agent.client import RECONNECT_MAX_S, reconnect_delay
from llmgw.catalog.parts import Origin, OriginFile
from llmgw.engines.profile import EngineAdapter, EngineProfile
from llmgw.errors import AgentProtocolError
from llmgw.protocol.inventory import Inventory
from llmgw.protocol.messages import (
    AGENT_PATH,
    PROTOCOL_VERSION,
    AgentMessage,
    ControlMessage,
    Error,
    FetchProgress,
    Firewall,
    Heartbeat,
    NodeSettings,
    ProfileSpec,
    Register,
    Registered,
    ReplicaState,
    ReplicaStatus,
    Settings,
    StartReplica,
    StopReplica,
    decode_from_agent,
    decode_from_control,
    encode,
)


def _inventory() -> Inventory:
    return Inventory(
        hostname="n1",
        llmgw_version="0.1.0",
        cpu_cores=8,
        memory_total_bytes=1 << 34,
        memory_available_bytes=1 << 33,
        weights_dir="/var/lib/llmgw/agent/weights",
        disk_free_bytes=1 << 40,
        disk_total_bytes=1 << 41,
        labels={"llmgw.io/rack": "r1"},
        engines={"sim": "0.1.0", "llamacpp": "b10434"},
    )


def _profile() -> EngineProfile:
    return EngineProfile(
        name="cpu",
        engine="llamacpp",
        args=("--parallel", "2"),
        env={"OMP_PROC_BIND": "true"},
        model_path="hf:HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/smollm2.gguf",
        served_model_name="smol",
        adapters=(EngineAdapter("tone", "/adapters/tone.gguf"),),
        cpu_cores=2,
        startup_timeout=timedelta(minutes=3),
    )


AGENT_MESSAGES: list[AgentMessage] = [
    Register(
        node_id="n1",
        inventory=_inventory(),
        replicas=(
            ReplicaState(replica_id="r1", state=ReplicaStatus.READY, url="http://10.0.0.5:20000", pid=42),
        ),
    ),
    Heartbeat(seq=3, inventory=None, replicas=(ReplicaState(replica_id="r1", state=ReplicaStatus.STARTING),)),
    Heartbeat(seq=4, inventory=_inventory()),
    ReplicaState(
        replica_id="r2",
        state=ReplicaStatus.CRASHED,
        detail="the engine exited unasked (signal 9)",
        log_tail=("line one", "line two"),
        exit_code=-9,
    ),
    FetchProgress(replica_id="r3", source="hf:a/b", file="b.gguf", done_bytes=10, total_bytes=None),
    Error(code="refused", message="no", replica_id="r4"),
]

CONTROL_MESSAGES: list[ControlMessage] = [
    Registered(node_id="n1", heartbeat_interval=timedelta(seconds=2), settings=NodeSettings(firewall=False)),
    StartReplica(
        replica_id="r1",
        model="smol",
        profile=ProfileSpec.of(_profile()),
        ports=(20001,),
        cpu_cores=(0, 1),
        context_length=2048,
        origin=Origin(
            repo="a/b", revision="abc", files=(OriginFile(path="b.gguf", sha256="00" * 32, bytes=9),)
        ),
    ),
    StopReplica(replica_id="r1", drain=timedelta(seconds=30), term=3),
    Settings(
        settings=NodeSettings(firewall=True, firewall_networks=("10.1.0.0/16",), port_range=(30000, 30100))
    ),
    Firewall(enabled=True, networks=("10.0.0.2", "10.9.0.0/16"), port_range=(30000, 30100), ports=(7443,)),
    Error(code="version", message="speaks 2"),
]


@pytest.mark.parametrize("message", AGENT_MESSAGES, ids=lambda m: m.type)
def test_agent_messages_survive_the_wire(message: object) -> None:
    assert decode_from_agent(encode(message)) == message  # type: ignore[arg-type]


@pytest.mark.parametrize("message", CONTROL_MESSAGES, ids=lambda m: m.type)
def test_control_messages_survive_the_wire(message: object) -> None:
    assert decode_from_control(encode(message)) == message  # type: ignore[arg-type]


def test_frames_are_plain_json_with_a_type_and_readable_durations() -> None:
    frame = orjson.loads(encode(StopReplica(replica_id="r1", drain=timedelta(seconds=90))))
    assert frame == {"type": "stop_replica", "replica_id": "r1", "drain": "1m30s", "term": 0}
    register = orjson.loads(encode(AGENT_MESSAGES[0]))
    assert register["version"] == PROTOCOL_VERSION
    assert register["replicas"][0]["state"] == "ready"
    assert AGENT_PATH.startswith("/")


def test_each_side_reads_only_the_other_sides_messages() -> None:
    with pytest.raises(AgentProtocolError, match="not a protocol message"):
        decode_from_agent(encode(StopReplica(replica_id="r1")))
    with pytest.raises(AgentProtocolError, match="not a protocol message"):
        decode_from_control(encode(Heartbeat(seq=1)))


def test_a_missing_field_is_named() -> None:
    with pytest.raises(AgentProtocolError, match=r"stop_replica\.replica_id: Field required"):
        decode_from_control('{"type": "stop_replica"}')


def test_an_unknown_field_is_refused_not_ignored() -> None:
    with pytest.raises(AgentProtocolError, match="drain_s"):
        decode_from_control('{"type": "stop_replica", "replica_id": "r1", "drain_s": 5}')


def test_a_frame_that_is_not_json_says_so() -> None:
    with pytest.raises(AgentProtocolError, match="not JSON"):
        decode_from_agent(b"\x00 nope")


def test_a_bare_number_is_not_a_duration() -> None:
    with pytest.raises(AgentProtocolError, match="drain"):
        decode_from_control('{"type": "stop_replica", "replica_id": "r1", "drain": 30}')


def test_ended_states_are_the_three_ends() -> None:
    assert {s for s in ReplicaStatus if s.ended} == {
        ReplicaStatus.STOPPED,
        ReplicaStatus.FAILED,
        ReplicaStatus.CRASHED,
    }


def test_a_profile_crosses_the_wire_whole() -> None:
    profile = _profile()
    spec = decode_from_control(encode(CONTROL_MESSAGES[1]))
    assert isinstance(spec, StartReplica)
    assert spec.profile.profile() == profile


_text = st.text(min_size=1, max_size=12)


@given(
    name=_text,
    engine=st.sampled_from(["vllm", "llamacpp", "sglang", "sim"]),
    tp=st.integers(1, 8),
    args=st.lists(_text, max_size=4).map(tuple),
    env=st.dictionaries(_text, st.text(max_size=8), max_size=3),
    adapters=st.lists(st.tuples(_text, _text), max_size=3),
    seconds=st.integers(1, 7200),
    cores=st.integers(0, 64),
)
def test_any_profile_round_trips(
    name: str,
    engine: str,
    tp: int,
    args: tuple[str, ...],
    env: dict[str, str],
    adapters: list[tuple[str, str]],
    seconds: int,
    cores: int,
) -> None:
    profile = EngineProfile(
        name=name,
        engine=engine,
        tp=tp,
        args=args,
        env=env,
        adapters=tuple(EngineAdapter(n, p) for n, p in adapters),
        startup_timeout=timedelta(seconds=seconds),
        cpu_cores=cores,
    )
    order = StartReplica(replica_id="r", model="m", profile=ProfileSpec.of(profile))
    decoded = decode_from_control(encode(order))
    assert isinstance(decoded, StartReplica)
    assert decoded.profile.profile() == profile


def test_reconnect_waits_double_up_to_a_cap_with_jitter_taken_off() -> None:
    no_jitter = [reconnect_delay(n, rng=lambda: 0.0) for n in range(10)]
    assert no_jitter[:4] == [0.5, 1.0, 2.0, 4.0]
    assert max(no_jitter) == RECONNECT_MAX_S
    assert reconnect_delay(0, rng=lambda: 1.0) == pytest.approx(0.375)
    assert reconnect_delay(10_000, rng=lambda: 0.0) == RECONNECT_MAX_S

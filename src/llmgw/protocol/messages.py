"""The agent protocol: every message between a node agent and the control plane.

One WebSocket per agent (`AGENT_PATH` on `agent_listen`, mutual TLS unless the cluster
runs `agent_insecure`), opened by the agent, carries JSON text frames in both
directions. Each frame is one message: an object whose `type` names it. docs/agent-
protocol.md tells the exchange as a story; this module is its definition.

    agent → control plane                control plane → agent
    register        (first frame)        registered      (answer to register)
    heartbeat       (every interval)     start_replica   (an order)
    replica_state   (on every change)    stop_replica    (an order)
    fetch_progress  (weights download)   settings        (cluster settings changed)
    error                                firewall        (llmgw's nft table: at register,
                                                          and on every change)
                                         error

Rules both sides keep:

- The agent speaks first. `register.version` is its PROTOCOL_VERSION; a control plane
  that does not speak it answers `error` (code `version`) and closes.
- Orders are idempotent and keyed by `replica_id`, chosen by the control plane: a
  second `start_replica` for a replica the agent runs is answered with its state, and
  never starts a second process; `stop_replica` for one it does not know is answered
  `stopped`. A reconnecting agent lists what still runs in `register.replicas`, so a
  control plane restart or a network blip adopts serving engines instead of
  restarting them.
- Every state a replica enters is sent as `replica_state`, and every heartbeat repeats
  all of them, so a frame lost with a broken connection is corrected by the next one.
  Ended replicas (stopped, failed, crashed) stay listed until a `stop_replica` for them
  acknowledges the end.
- Messages are strict: an unknown field or type is an error, answered with `error`
  and otherwise ignored. A field is only ever added together with a new version.
- Orders are fenced (version 2): each carries the leader's `term`, and an agent refuses
  one whose term is below the highest it has obeyed (`error`, code `stale_term`). A
  control plane that does not hold the leader lease refuses `register` (`error`, code
  `not_leader`) and closes, so an agent given several servers dials the next one.
"""

from __future__ import annotations

import enum
from datetime import timedelta
from typing import Annotated, Literal, TypeVar

import orjson
import pydantic
from pydantic import Field, TypeAdapter

from llmgw.catalog.parts import Origin
from llmgw.core.durations import Duration
from llmgw.core.strict import Strict
from llmgw.engines.profile import EngineAdapter, EngineProfile
from llmgw.errors import AgentProtocolError
from llmgw.protocol.inventory import Inventory

PROTOCOL_VERSION = 2
"""Bumped whenever a message gains, loses or changes a field (2: orders carry `term`)."""

AGENT_PATH = "/agent/v1"
"""The WebSocket's path on `agent_listen`."""

NOT_LEADER = "not_leader"
"""The `error` code of a control plane that does not hold the leader lease."""
STALE_TERM = "stale_term"
"""The `error` code of an agent refusing an order from a deposed leader."""

LOG_TAIL_LINES = 40
"""Lines of an engine's log sent with a replica that failed or crashed."""


class ReplicaStatus(enum.StrEnum):
    """Where a replica is in its life. Only the agent moves it; the control plane
    reads it. The three last ones are ends: the process is gone."""

    STARTING = "starting"
    """Weights being fetched, or the process started and its health not yet 200."""
    READY = "ready"
    """Its health endpoint answers 200: it serves at `url`."""
    STOPPING = "stopping"
    """Being drained or stopped on the control plane's order."""
    STOPPED = "stopped"
    """Ended on the control plane's order."""
    FAILED = "failed"
    """It never became ready: weights, ports or launch refused, the process exited
    while loading, or its health did not answer 200 within `startup_timeout`."""
    CRASHED = "crashed"
    """It was ready and its process ended without being asked to."""

    @property
    def ended(self) -> bool:
        return self in (ReplicaStatus.STOPPED, ReplicaStatus.FAILED, ReplicaStatus.CRASHED)


# --- data carried by messages -----------------------------------------------------------


class AdapterSpec(Strict):
    """A LoRA adapter of the profile: its name and where its files come from."""

    name: str
    path: str


class ProfileSpec(Strict):
    """`EngineProfile` as data on the wire: the catalog profile resolved for its model,
    which the agent turns into a command line with `llmgw.engines`."""

    name: str
    engine: str
    gpu_class: str = ""
    tp: int = 1
    pp: int = 0
    gpus_per_node: int = 0
    nodes: int = 1
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    model_path: str = ""
    """The weights' source as the catalog has it: a path, a URL, a mirror path or a
    Hugging Face id (`llmgw.agent.weights` says how each is resolved)."""
    served_model_name: str = ""
    adapters: tuple[AdapterSpec, ...] = ()
    kv_events: bool = False
    cpu_cores: int = 0
    startup_timeout: Duration = timedelta(minutes=20)
    runtime_lora: bool = False
    max_loaded_adapters: int = 0

    @classmethod
    def of(cls, profile: EngineProfile) -> ProfileSpec:
        return cls(
            name=profile.name,
            engine=profile.engine,
            gpu_class=profile.gpu_class,
            tp=profile.tp,
            pp=profile.pp,
            gpus_per_node=profile.gpus_per_node,
            nodes=profile.nodes,
            args=profile.args,
            env=dict(profile.env),
            model_path=profile.model_path,
            served_model_name=profile.served_model_name,
            adapters=tuple(AdapterSpec(name=a.name, path=a.path) for a in profile.adapters),
            kv_events=profile.kv_events,
            cpu_cores=profile.cpu_cores,
            startup_timeout=profile.startup_timeout,
            runtime_lora=profile.runtime_lora,
            max_loaded_adapters=profile.max_loaded_adapters,
        )

    def profile(self) -> EngineProfile:
        return EngineProfile(
            name=self.name,
            engine=self.engine,
            gpu_class=self.gpu_class,
            tp=self.tp,
            pp=self.pp,
            gpus_per_node=self.gpus_per_node,
            nodes=self.nodes,
            args=self.args,
            env=dict(self.env),
            model_path=self.model_path,
            served_model_name=self.served_model_name,
            adapters=tuple(EngineAdapter(a.name, a.path) for a in self.adapters),
            kv_events=self.kv_events,
            cpu_cores=self.cpu_cores,
            startup_timeout=self.startup_timeout,
            runtime_lora=self.runtime_lora,
            max_loaded_adapters=self.max_loaded_adapters,
        )


class NodeSettings(Strict):
    """Cluster-wide settings every agent applies, sent at registration and again in a
    `settings` message whenever one changes."""

    firewall: bool = True
    """Whether llmgw manages its nftables table on the node (`firewall.enabled`)."""
    firewall_networks: tuple[str, ...] = ()
    """Networks allowed to llmgw's internal ports beyond the node's own."""
    mirror_url: str = ""
    """The model mirror's file address as nodes reach it (`offline.mirror`); weights that
    are not on the node are fetched from here."""
    port_range: tuple[int, int] = (20000, 20999)
    """`control.port_range`: the inclusive range the agent gives engines their ports from."""
    mgmt_interface: str = ""
    """`control.mgmt_interface`: the interface multi-node replicas bootstrap over."""


# --- agent → control plane --------------------------------------------------------------


class ReplicaState(Strict):
    """One replica's state: sent on every change, and listed in `register` and every
    `heartbeat`."""

    type: Literal["replica_state"] = "replica_state"
    replica_id: str
    model: str = ""
    profile: str = ""
    engine: str = ""
    state: ReplicaStatus
    url: str = ""
    """Where it serves the API (`http://host:port`), once a port is assigned."""
    pid: int = 0
    port: int = 0
    detail: str = ""
    """Why it is in this state, in a sentence: the startup timeout, the exit status,
    the weights download under way."""
    log_tail: tuple[str, ...] = ()
    """The last LOG_TAIL_LINES lines of its engine log, for failed and crashed."""
    exit_code: int | None = None
    """The process's exit status where known; -N is signal N. None while it runs or
    where the agent could not see the end (an adopted process)."""


class Register(Strict):
    """The agent's first frame on every connection."""

    type: Literal["register"] = "register"
    version: int = PROTOCOL_VERSION
    node_id: str
    inventory: Inventory
    replicas: tuple[ReplicaState, ...] = ()
    """Every replica the agent knows, running ones first among them: what a control
    plane that restarted adopts."""


class Heartbeat(Strict):
    """Sent every `registered.heartbeat_interval`."""

    type: Literal["heartbeat"] = "heartbeat"
    seq: int
    """Counts from 1 on each connection."""
    inventory: Inventory | None = None
    """The whole inventory when it changed since the last one sent; None otherwise."""
    replicas: tuple[ReplicaState, ...] = ()


class FetchProgress(Strict):
    """A weights download under way for a replica, at most once a second per file."""

    type: Literal["fetch_progress"] = "fetch_progress"
    replica_id: str
    source: str
    file: str
    done_bytes: int
    total_bytes: int | None = None
    """None while the server has not said how long the file is."""


# --- control plane → agent --------------------------------------------------------------


class Registered(Strict):
    """The control plane accepts the agent."""

    type: Literal["registered"] = "registered"
    version: int = PROTOCOL_VERSION
    node_id: str
    heartbeat_interval: Duration = timedelta(seconds=5)
    settings: NodeSettings = Field(default_factory=NodeSettings)


class StartReplica(Strict):
    """Start one replica of a model's profile on this node."""

    type: Literal["start_replica"] = "start_replica"
    replica_id: str
    model: str
    profile: ProfileSpec
    ports: tuple[int, ...] = ()
    """The ports placement chose, in `llmgw.engines.ports_needed` order (HTTP, rendezvous,
    KV events, each only where needed). Empty: the agent picks free ones from its
    `control.port_range`."""
    gpus: tuple[str, ...] = ()
    """Card indices or MIG UUIDs, as CUDA_VISIBLE_DEVICES lists them."""
    cpu_cores: tuple[int, ...] = ()
    """Cores reserved for a CPU profile. Empty with `profile.cpu_cores` > 0: the agent
    reserves that many of the cores no other replica of its has."""
    node_rank: int = 0
    master_address: str = ""
    dist_port: int = 0
    context_length: int = 0
    embeddings: bool = False
    api_key: str = ""
    """The key the engine demands of callers; known only to the gateway and the agent."""
    origin: Origin | None = None
    """The registry repository and per-file checksums the fetched weights must match."""
    term: int = 0
    """The leader lease's term its sender held when it decided (a fencing token); 0 where
    the control plane runs without a lease, which the agent never refuses."""


class StopReplica(Strict):
    """Stop one replica; for an ended one, acknowledge the end so it is forgotten."""

    type: Literal["stop_replica"] = "stop_replica"
    replica_id: str
    drain: Duration = timedelta(0)
    """How long in-flight requests may take to finish before SIGTERM; the gateway has
    stopped sending new ones. 0: no wait."""
    term: int = 0
    """As `StartReplica.term`."""


class Settings(Strict):
    """New cluster settings."""

    type: Literal["settings"] = "settings"
    settings: NodeSettings


class Firewall(Strict):
    """What llmgw's nftables table on the node should be: sent after `registered`, and
    again whenever `firewall.enabled` or `firewall_networks` changes. The agent (as
    root) installs the table, or removes it when `enabled` is false.

    The same object, as JSON, is the state file a control plane writes for its own
    machine (`llmgw firewall sync` applies it)."""

    type: Literal["firewall"] = "firewall"
    enabled: bool = True
    networks: tuple[str, ...] = ()
    """Sources allowed to the guarded ports, addresses or CIDR prefixes: the control
    plane's address as the node reaches it, and `firewall_networks`. The agent adds the
    addresses of every control plane it was given (their gateways) and loopback."""
    port_range: tuple[int, int] = (20000, 20999)
    """`control.port_range`: the engines' ports, guarded."""
    ports: tuple[int, ...] = ()
    """Other ports guarded besides the range (llmgw's own internal ports)."""


# --- both directions -------------------------------------------------------------------


class Error(Strict):
    """A frame that could not be taken, or an order that could not be carried out."""

    type: Literal["error"] = "error"
    code: str
    """`version`, `invalid` (not a protocol message), `unexpected` (a message out of
    turn), `refused` (an order this node cannot carry out), `not_leader` (this control
    plane does not hold the leader lease: dial another), `stale_term` (an order whose
    term is below one this agent has already obeyed), `revoked` (the node's certificate
    was revoked: `llmgw node remove`)."""
    message: str
    replica_id: str = ""


AgentMessage = Register | Heartbeat | ReplicaState | FetchProgress | Error
ControlMessage = Registered | StartReplica | StopReplica | Settings | Firewall | Error
Message = AgentMessage | ControlMessage

_T = TypeVar("_T")

_AGENT = TypeAdapter[AgentMessage](Annotated[AgentMessage, Field(discriminator="type")])
_CONTROL = TypeAdapter[ControlMessage](Annotated[ControlMessage, Field(discriminator="type")])


def encode(message: Message) -> str:
    """One frame's text."""
    return orjson.dumps(message.model_dump(mode="json")).decode()


def _decode(adapter: TypeAdapter[_T], data: str | bytes, side: str) -> _T:
    try:
        return adapter.validate_python(orjson.loads(data))
    except orjson.JSONDecodeError as exc:
        raise AgentProtocolError(f"a frame from the {side} is not JSON: {exc}") from exc
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the message"
        raise AgentProtocolError(
            f"a frame from the {side} is not a protocol message: {where}: {first['msg']}"
        ) from exc


def decode_from_agent(data: str | bytes) -> AgentMessage:
    """A frame the control plane received; AgentProtocolError naming what is wrong."""
    return _decode(_AGENT, data, "agent")


def decode_from_control(data: str | bytes) -> ControlMessage:
    """A frame the agent received; AgentProtocolError naming what is wrong."""
    return _decode(_CONTROL, data, "control plane")

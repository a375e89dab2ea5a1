"""What starting one replica of a profile on one node takes: the context the agent gives
the engine (address, ports, devices, cores, paths) and the launch it gets back (command
line, environment, how readiness and load are read, how the process is stopped).

The engine modules (`vllm`, `llamacpp`, `sglang`, `trtllm`, `sim`) turn a profile and a
context into a `Launch`; `launchers.launch_for` picks the module. Everything here is data
in, data out: nothing is started, so every command line is tested as a value.

Two rules hold for every engine:

- llmgw's flags come first and the profile's own `args` last. The catalog refuses the
  flags the agent decides (see `safety`), so the two never name the same flag; where
  the profile may set a flag llmgw would otherwise choose (llama-server's `--parallel`,
  vLLM's `--max-loras`), llmgw leaves its own out and reads the profile's.
- The environment is the agent's defaults, then the profile's `env`, then what the
  agent must decide (devices, keys, hash seed): the catalog refuses those names in a
  profile, so the last layer only ever adds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from llmgw.errors import ConfigError

if TYPE_CHECKING:
    # Only the annotation: importing the router package at run time from here would make
    # `llmgw.engines` pull in the gateway, which imports the catalog, which imports this.
    from llmgw.engines.metrics import MetricNames
    from llmgw.engines.profile import EngineProfile


@dataclass(frozen=True)
class LaunchContext:
    """What the agent decided for one replica on this node."""

    port: int
    """The engine's HTTP port, from `control.port_range`; 0 on a node that serves no
    HTTP (see `ports_needed`)."""
    host: str = "127.0.0.1"
    """The address the engine binds: loopback, or the node's address the gateway reaches."""
    dist_port: int = 0
    """A multi-node replica's rendezvous port on its first node (vLLM's master port,
    SGLang's dist-init port); the same number on every node of the replica."""
    kv_events_port: int = 0
    """The port vLLM publishes KV-cache events on, for a profile with kv_events."""
    gpus: tuple[str, ...] = ()
    """What `CUDA_VISIBLE_DEVICES` lists: card indices as nvidia-smi numbers them ("0",
    "3"), or MIG device UUIDs, which CUDA opens only by UUID. Empty: no card."""
    cpu_cores: tuple[int, ...] = ()
    """Cores reserved for the replica: its CPU affinity, and llama-server's threads."""
    node_rank: int = 0
    """This node's place in a multi-node replica; 0 serves the API."""
    master_address: str = ""
    """The first node's address on the management network, for a multi-node replica."""
    node_address: str = ""
    """This node's address on the management network, which its peers reach it at."""
    mgmt_interface: str = ""
    """The network interface NCCL and Gloo bootstrap over (`control.mgmt_interface`)."""
    model_path: str = ""
    """The weights as fetched onto this node; empty uses the profile's source as is."""
    adapter_paths: Mapping[str, str] = field(default_factory=dict)
    """Adapter name to its files on this node; an adapter left out uses its source."""
    state_dir: str = ""
    """The replica's own directory: its working directory, so what an engine writes
    relative to it stays with the replica."""
    api_key: str = ""
    """The key the engine requires of callers, held only by the gateway; empty: none."""
    context_length: int = 0
    """Tokens one request may use, prompt and answer (the model's context_length); 0 is
    unknown, and the engine keeps its own default."""
    embeddings: bool = False
    """The model is an embedding model (its capabilities.embeddings): llama-server and
    SGLang then serve /v1/embeddings only."""


@dataclass(frozen=True)
class Launch:
    """How to start, watch and stop one engine process."""

    engine: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    """Set over the environment the engine inherits from the agent, whose own LLMGW_
    settings the agent should not pass on."""
    metric_names: MetricNames
    """The load gauges the router reads from this engine's metrics page."""
    metric_prefix: str
    """What every metric family the engine publishes starts with."""
    startup_timeout: timedelta
    """How long loading may take before the replica counts as failed to start."""
    cwd: str = ""
    serves_http: bool = True
    """False for a multi-node replica's other nodes: they run workers, and the replica's
    health is its first node's."""
    health_path: str = "/health"
    """The path that answers 200 once the engine serves requests (503 or a refused
    connection before); empty where `serves_http` is False."""
    ready: str = ""
    """How readiness is judged, in words, for the agent's log and the operator."""
    metrics_path: str = "/metrics"
    enforces_api_key: bool = True
    """Whether the engine refuses callers without the context's api_key; where it cannot,
    the agent must not expose the port beyond the gateway's reach."""
    adapter_ids: Mapping[str, int] = field(default_factory=dict)
    """llama-server's number for each adapter, in load order: a request picks an adapter
    by number, not by name."""
    stop_grace: timedelta = timedelta(seconds=30)
    """How long the engine may take after SIGTERM. Start it in a session of its own and
    signal the group: vLLM and SGLang run their workers as child processes."""
    kill_after_grace: bool = True
    """SIGKILL the process group once the grace period is over."""
    cpu_affinity: tuple[int, ...] = ()
    """Cores the process (and its children) may run on; empty: no restriction."""


@dataclass(frozen=True)
class PortNeeds:
    """Which ports one replica takes on one node, each from `control.port_range`."""

    http: bool = True
    dist: bool = False
    kv_events: bool = False

    @property
    def count(self) -> int:
        return int(self.http) + int(self.dist) + int(self.kv_events)


MULTINODE_ENGINES: tuple[str, ...] = ("vllm", "sglang")
"""Engines that span nodes: each node runs its own process, joined at a rendezvous."""


def ports_needed(profile: EngineProfile, node_rank: int = 0) -> PortNeeds:
    """The ports a replica of this profile takes on the node of this rank. The first node
    listens for the API, the rendezvous and the cache events; vLLM's other nodes run
    workers only, while SGLang's still bind the HTTP port they are given."""
    first = node_rank == 0
    return PortNeeds(
        http=first or profile.engine == "sglang",
        dist=first and profile.nodes > 1 and profile.engine in MULTINODE_ENGINES,
        kv_events=first and profile.kv_events and profile.engine == "vllm",
    )


# --- helpers shared by the engine modules ---------------------------------------------


def flag_of(arg: str) -> str | None:
    """The flag an argument sets (`--port=8000` and `--port 8000` alike, long flags with
    '_' read as '-', as vLLM's, SGLang's and trtllm-serve's parsers read them)."""
    words = arg.strip().split()
    if not words or not words[0].startswith("-"):
        return None
    flag = words[0].split("=", 1)[0]
    return flag.replace("_", "-") if flag.startswith("--") else flag


def profile_sets(args: Sequence[str], *flags: str) -> bool:
    """Whether the profile's args set any of `flags` (written with '-')."""
    return any(flag_of(arg) in flags for arg in args)


def profile_value(args: Sequence[str], *flags: str) -> str | None:
    """The value the profile's args give one of `flags`: `--x=v`, `--x v` in one string,
    or `--x` followed by `v`; None when unset or given no value."""
    for i, arg in enumerate(args):
        if flag_of(arg) not in flags:
            continue
        text = arg.strip()
        if "=" in text.split()[0]:
            return text.split()[0].split("=", 1)[1]
        words = text.split()
        if len(words) > 1:
            return words[1]
        if i + 1 < len(args) and flag_of(args[i + 1]) is None:
            return args[i + 1].strip()
        return None
    return None


def device_env(gpus: Sequence[str]) -> dict[str, str]:
    """The variables that show a replica exactly its cards. CUDA numbers cards fastest
    first unless told otherwise; nvidia-smi, and so discovery and placement, by PCI bus."""
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(gpus)}


def fabric_env(ctx: LaunchContext) -> dict[str, str]:
    """Which interface a multi-node replica's collectives bootstrap over. Defaults only: a
    profile may name another (an InfiniBand port for NCCL, say) in its env."""
    if not ctx.mgmt_interface:
        return {}
    return {"GLOO_SOCKET_IFNAME": ctx.mgmt_interface, "NCCL_SOCKET_IFNAME": ctx.mgmt_interface}


def layered_env(
    defaults: Mapping[str, str], profile_env: Mapping[str, str], forced: Mapping[str, str]
) -> dict[str, str]:
    """The agent's defaults, under the profile's env, under what the agent decides."""
    return {**defaults, **profile_env, **forced}


def model_path(profile: EngineProfile, ctx: LaunchContext) -> str:
    """The weights this node loads."""
    return ctx.model_path or profile.model_path


def adapter_path(ctx: LaunchContext, name: str, source: str) -> str:
    """An adapter's files on this node."""
    return ctx.adapter_paths.get(name, source)


def _who(profile: EngineProfile) -> str:
    return f"model {profile.served_model_name!r} profile {profile.name!r} (engine {profile.engine})"


def refusal(profile: EngineProfile, problem: str) -> ConfigError:
    """A launch that cannot be made, worded as the catalog words a refused profile."""
    return ConfigError([f"{_who(profile)}: {problem}"])


def check_context(
    profile: EngineProfile,
    ctx: LaunchContext,
    *,
    needs_gpus: bool,
    spans_nodes: bool,
    needs_weights: bool = True,
    needs_port: bool = True,
) -> None:
    """Refuses a context that cannot start this profile: one the placement or the
    agent got wrong, caught before a process fails minutes into loading."""
    problems: list[str] = []
    if needs_port and not 1 <= ctx.port <= 65535:
        problems.append(f"port {ctx.port} is not a port; give one from control.port_range")
    if needs_weights and not model_path(profile, ctx):
        problems.append("no weights: the profile has no source and the context no model_path")
    if needs_gpus and not ctx.gpus:
        problems.append("it needs GPUs and the context assigns none; place it on a node with its cards")
    if ctx.gpus and profile.gpus_per_node > 0 and len(ctx.gpus) != profile.gpus_per_node:
        problems.append(
            f"gpus_per_node is {profile.gpus_per_node} and the context assigns {len(ctx.gpus)} GPUs"
            f" ({','.join(ctx.gpus)}); assign exactly gpus_per_node"
        )
    if profile.nodes > 1:
        if not spans_nodes:
            problems.append(
                f"engine {profile.engine} runs a replica on one node, and nodes is {profile.nodes};"
                " use vllm or sglang for a multi-node replica"
            )
        else:
            if not 0 <= ctx.node_rank < profile.nodes:
                problems.append(f"node_rank {ctx.node_rank} is not within the {profile.nodes} nodes")
            if not ctx.master_address or not 1 <= ctx.dist_port <= 65535:
                problems.append("a multi-node replica needs the first node's master_address and a dist_port")
    if problems:
        raise ConfigError([f"{_who(profile)}: {p}" for p in problems])

"""vLLM: `vllm serve`'s command line and environment for one replica on one node.

Flags are those of vLLM's engine and frontend arguments as of the 0.30 line the seed
pins (checked against vLLM's `EngineArgs.add_cli_args`, its `FrontendArgs` and the
multi-node guide; the list the tests check against is
tests/unit/engines/fixtures/vllm-serve-flags.txt).

A replica wider than a node runs without Ray: every node starts `vllm serve` with the
same parallel sizes, `--nnodes`, its `--node-rank` and the first node's `--master-addr`
and `--master-port` (the multiprocessing executor), and every node but the first runs
`--headless`: workers only, no API. The agent already starts one process per node, so
this needs nothing Ray would have to be installed, started and kept alive for.
"""

from __future__ import annotations

import json
from datetime import timedelta

from llmgw.engines.launch import (
    Launch,
    LaunchContext,
    adapter_path,
    check_context,
    device_env,
    fabric_env,
    layered_env,
    model_path,
    profile_sets,
    refusal,
)
from llmgw.engines.metrics import NAMES_BY_ENGINE
from llmgw.engines.profile import EngineProfile

ENGINE = "vllm"
BINARY = "vllm"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
METRIC_PREFIX = "vllm:"
METRICS = NAMES_BY_ENGINE[ENGINE]

KV_EVENTS_HASH_ALGO = "sha256_cbor"
"""The block hash vLLM computes when publishing cache events: a canonical CBOR encoding
hashed with SHA-256, which the router can compute the same way from a prompt's tokens."""
KV_EVENTS_HASH_SEED = "0"
"""PYTHONHASHSEED for a kv_events replica: vLLM derives the hash of the first block's
parent from it, so it must be the same on every replica and known to the router."""

# vLLM drains its engine cores on SIGTERM; workers stuck in a collective do not, and a
# killed API server would leave them holding the cards, hence the group kill after it.
STOP_GRACE = timedelta(seconds=30)


def kv_events_config(ctx: LaunchContext) -> str:
    """`--kv-events-config`: publish block stored/removed events over ZeroMQ, bound on
    the replica's address at its kv_events port."""
    host = "*" if ctx.host in ("", "0.0.0.0", "::") else ctx.host
    config = {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": f"tcp://{host}:{ctx.kv_events_port}",
    }
    return json.dumps(config, separators=(",", ":"))


def _lora_args(profile: EngineProfile, ctx: LaunchContext) -> list[str]:
    if profile.runtime_lora:
        # Loaded on demand through /v1/load_lora_adapter (the env the catalog set opens
        # it); the cap is how many the replica holds, on the card and in host memory.
        out = ["--enable-lora"]
        if not profile_sets(profile.args, "--max-loras"):
            out += ["--max-loras", str(profile.max_loaded_adapters)]
        if not profile_sets(profile.args, "--max-cpu-loras"):
            out += ["--max-cpu-loras", str(profile.max_loaded_adapters)]
        return out
    if not profile.adapters:
        return []
    out = ["--enable-lora"]
    if not profile_sets(profile.args, "--max-loras"):
        # vLLM's default of one adapter per batch would serialise requests for different
        # adapters; every adapter the replica serves may share a batch.
        out += ["--max-loras", str(len(profile.adapters))]
    out.append("--lora-modules")
    out += [f"{a.name}={adapter_path(ctx, a.name, a.path)}" for a in profile.adapters]
    return out


def launch(profile: EngineProfile, ctx: LaunchContext, binary: str | None = None) -> Launch:
    """One node's `vllm serve` for this profile."""
    multinode = profile.nodes > 1
    first = ctx.node_rank == 0
    check_context(profile, ctx, needs_gpus=True, spans_nodes=True, needs_port=first)
    if profile.kv_events and first and not 1 <= ctx.kv_events_port <= 65535:
        raise refusal(profile, "kv_events needs a kv_events_port for the replica to publish on")
    argv = [binary or BINARY, "serve", model_path(profile, ctx)]
    if first:
        argv += ["--host", ctx.host, "--port", str(ctx.port)]
    argv += ["--served-model-name", profile.served_model_name]
    argv += ["--tensor-parallel-size", str(max(profile.tp, 1))]
    argv += ["--pipeline-parallel-size", str(max(profile.pp, 1))]
    if multinode:
        argv += ["--distributed-executor-backend", "mp"]
        argv += ["--nnodes", str(profile.nodes), "--node-rank", str(ctx.node_rank)]
        argv += ["--master-addr", ctx.master_address, "--master-port", str(ctx.dist_port)]
        if not first:
            argv.append("--headless")
    if ctx.context_length > 0 and not profile_sets(profile.args, "--max-model-len"):
        argv += ["--max-model-len", str(ctx.context_length)]
    argv += _lora_args(profile, ctx)
    forced = device_env(ctx.gpus)
    if profile.kv_events:
        argv += ["--enable-prefix-caching", "--prefix-caching-hash-algo", KV_EVENTS_HASH_ALGO]
        argv += ["--kv-events-config", kv_events_config(ctx)]
        forced["PYTHONHASHSEED"] = KV_EVENTS_HASH_SEED
    if ctx.api_key and first:
        # Read from the environment rather than argv, where every local user's `ps` sees it.
        forced["VLLM_API_KEY"] = ctx.api_key
    if multinode and ctx.node_address:
        forced["VLLM_HOST_IP"] = ctx.node_address
    argv += profile.args
    return Launch(
        engine=ENGINE,
        argv=tuple(argv),
        env=layered_env(fabric_env(ctx) if multinode else {}, profile.env, forced),
        metric_names=METRICS,
        metric_prefix=METRIC_PREFIX,
        startup_timeout=profile.startup_timeout,
        cwd=ctx.state_dir,
        serves_http=first,
        health_path=HEALTH_PATH if first else "",
        ready=(
            f"GET {HEALTH_PATH} answers 200 (the port opens only once the weights are loaded)"
            if first
            else "the process stays up; the replica is ready when its first node is"
        ),
        metrics_path=METRICS_PATH if first else "",
        stop_grace=STOP_GRACE,
        kill_after_grace=True,
        cpu_affinity=ctx.cpu_cores,
    )

"""SGLang: `python -m sglang.launch_server`'s command line for one replica on one node.

Flags are SGLang's server arguments (checked against its server-arguments reference
and multi-node guide; the list is tests/unit/engines/fixtures/sglang-server-flags.txt).
SGLang is not among the seed's default engines: a cluster names its version to get it.

A replica wider than a node runs one `launch_server` per node with the same `--tp-size`,
`--nnodes`, its `--node-rank` and the first node's `--dist-init-addr`; only the first
node serves HTTP. The catalog gives SGLang no adapters and no KV events.
"""

from __future__ import annotations

from datetime import timedelta

from llmgw.engines.launch import (
    Launch,
    LaunchContext,
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

ENGINE = "sglang"
PYTHON = "python3"
MODULE = "sglang.launch_server"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
METRIC_PREFIX = "sglang:"
METRICS = NAMES_BY_ENGINE[ENGINE]
STOP_GRACE = timedelta(seconds=30)


def launch(profile: EngineProfile, ctx: LaunchContext, binary: str | None = None) -> Launch:
    """One node's SGLang server for this profile; `binary` is the Python interpreter
    whose environment has SGLang installed."""
    check_context(profile, ctx, needs_gpus=True, spans_nodes=True)
    if profile.adapters or profile.runtime_lora:
        raise refusal(profile, "llmgw serves adapters on vllm and llamacpp only; move them to such a profile")
    multinode = profile.nodes > 1
    first = ctx.node_rank == 0
    argv = [binary or PYTHON, "-m", MODULE, "--model-path", model_path(profile, ctx)]
    argv += ["--host", ctx.host, "--port", str(ctx.port)]
    argv += ["--served-model-name", profile.served_model_name]
    argv += ["--tp-size", str(max(profile.tp, 1))]
    if profile.pp > 1:
        argv += ["--pp-size", str(profile.pp)]
    if multinode:
        argv += ["--dist-init-addr", f"{ctx.master_address}:{ctx.dist_port}"]
        argv += ["--nnodes", str(profile.nodes), "--node-rank", str(ctx.node_rank)]
    argv.append("--enable-metrics")
    if ctx.context_length > 0 and not profile_sets(profile.args, "--context-length"):
        argv += ["--context-length", str(ctx.context_length)]
    if ctx.embeddings:
        argv.append("--is-embedding")
    if ctx.api_key and first:
        # SGLang reads its key from the command line only.
        argv += ["--api-key", ctx.api_key]
    argv += profile.args
    return Launch(
        engine=ENGINE,
        argv=tuple(argv),
        env=layered_env(fabric_env(ctx) if multinode else {}, profile.env, device_env(ctx.gpus)),
        metric_names=METRICS,
        metric_prefix=METRIC_PREFIX,
        startup_timeout=profile.startup_timeout,
        cwd=ctx.state_dir,
        serves_http=first,
        health_path=HEALTH_PATH if first else "",
        ready=(
            f"GET {HEALTH_PATH} answers 200"
            if first
            else "the process stays up; the replica is ready when its first node is"
        ),
        metrics_path=METRICS_PATH if first else "",
        stop_grace=STOP_GRACE,
        kill_after_grace=True,
        cpu_affinity=ctx.cpu_cores,
    )

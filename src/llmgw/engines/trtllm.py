"""TensorRT-LLM: `trtllm-serve`'s command line for one replica, on one node only.

Flags are trtllm-serve's options (its command reference; the list is
tests/unit/engines/fixtures/trtllm-serve-flags.txt). trtllm-serve spans machines only
under MPI launched from one of them, which agents that each start their own node's
processes do not do, so the catalog keeps its replicas to one node.

trtllm-serve takes no API key: the agent must keep its port reachable by the gateway
alone (`Launch.enforces_api_key` is False). Its Prometheus page is
`/prometheus/metrics`, with families prefixed `trtllm_`.
"""

from __future__ import annotations

from datetime import timedelta

from llmgw.engines.launch import (
    Launch,
    LaunchContext,
    check_context,
    device_env,
    layered_env,
    model_path,
    profile_sets,
    refusal,
)
from llmgw.engines.metrics import NAMES_BY_ENGINE
from llmgw.engines.profile import EngineProfile

ENGINE = "trtllm"
BINARY = "trtllm-serve"
HEALTH_PATH = "/health"
METRICS_PATH = "/prometheus/metrics"
METRIC_PREFIX = "trtllm_"
METRICS = NAMES_BY_ENGINE[ENGINE]
STOP_GRACE = timedelta(seconds=30)


def launch(profile: EngineProfile, ctx: LaunchContext, binary: str | None = None) -> Launch:
    """`trtllm-serve` for this profile on this node's cards."""
    check_context(profile, ctx, needs_gpus=True, spans_nodes=False)
    if profile.adapters or profile.runtime_lora:
        raise refusal(profile, "llmgw serves adapters on vllm and llamacpp only; move them to such a profile")
    argv = [binary or BINARY, model_path(profile, ctx)]
    argv += ["--host", ctx.host, "--port", str(ctx.port)]
    argv += ["--served_model_name", profile.served_model_name]
    argv += ["--tp_size", str(max(profile.tp, 1)), "--pp_size", str(max(profile.pp, 1))]
    if ctx.context_length > 0 and not profile_sets(profile.args, "--max-seq-len"):
        argv += ["--max_seq_len", str(ctx.context_length)]
    argv += profile.args
    return Launch(
        engine=ENGINE,
        argv=tuple(argv),
        env=layered_env({}, profile.env, device_env(ctx.gpus)),
        metric_names=METRICS,
        metric_prefix=METRIC_PREFIX,
        startup_timeout=profile.startup_timeout,
        cwd=ctx.state_dir,
        health_path=HEALTH_PATH,
        ready=f"GET {HEALTH_PATH} answers 200",
        metrics_path=METRICS_PATH,
        enforces_api_key=False,
        stop_grace=STOP_GRACE,
        kill_after_grace=True,
        cpu_affinity=ctx.cpu_cores,
    )

"""llama.cpp: `llama-server`'s command line and environment for one replica.

Flags are checked against the help of a real build (b10434,
tests/unit/engines/fixtures/llama-server-help.txt); the seed pins b10991, newer, which
keeps them.

Facts the launch is shaped by:

- `--ctx-size` is one KV pool split evenly across `--parallel` slots (llmgw sets the
  slot count, so the pool is not unified). A request may use one slot's share, so the
  pool is the model's context_length times the slots.
- On GPUs the model is split by layer across the node's cards (`--split-mode layer`,
  evenly by `--tensor-split`); llama.cpp has no tensor parallelism. On CPUs nothing is
  offloaded and `--threads` is the reserved cores.
- `/metrics` (with `--metrics`) and `/slots` report busy slots and deferred requests,
  never KV use; `/v1/embeddings` exists only with `--embeddings`, which then is all the
  server does.
- Adapters load at start, unapplied (`--lora-init-without-apply`): a request names one
  by its number in load order (`Launch.adapter_ids`), and one naming none gets the base
  model. Loaded applied, every adapter would change every answer.
- On SIGTERM the server waits for a running non-streaming request to finish, however
  long it takes, so stopping follows with SIGKILL after a short grace.
"""

from __future__ import annotations

from datetime import timedelta

from llmgw.engines.launch import (
    Launch,
    LaunchContext,
    adapter_path,
    check_context,
    device_env,
    layered_env,
    model_path,
    profile_sets,
    profile_value,
    refusal,
)
from llmgw.engines.metrics import NAMES_BY_ENGINE
from llmgw.engines.profile import EngineProfile

ENGINE = "llamacpp"
BINARY = "llama-server"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
METRIC_PREFIX = "llamacpp:"
METRICS = NAMES_BY_ENGINE[ENGINE]

DEFAULT_SLOTS = 4
"""Slots (`--parallel`) when the profile gives none: what llama-server's own automatic
choice settles on, written out so the context per slot can be computed."""
ALL_LAYERS = "999"
"""More layers than any model has: all of them on the cards. A number rather than
`all`, which older builds do not take."""
STOP_GRACE = timedelta(seconds=10)

_PARALLEL = ("-np", "--parallel")
_CTX = ("-c", "--ctx-size")
_GPU_LAYERS = ("-ngl", "--gpu-layers", "--n-gpu-layers")
_SPLIT = ("-sm", "--split-mode", "-ts", "--tensor-split", "-dev", "--device")
_THREADS = ("-t", "--threads")


def slots(profile: EngineProfile) -> int:
    """The slots the server runs: the profile's `--parallel`, or DEFAULT_SLOTS."""
    given = profile_value(profile.args, *_PARALLEL)
    if given is not None and given.strip().isdigit() and int(given) > 0:
        return int(given)
    return DEFAULT_SLOTS


def _device_args(profile: EngineProfile, ctx: LaunchContext) -> list[str]:
    if not ctx.gpus:
        # Nothing offloaded even where the build sees a card (a Vulkan build ignores
        # CUDA_VISIBLE_DEVICES): the cards belong to other replicas.
        return ["--device", "none", "--n-gpu-layers", "0"]
    out: list[str] = []
    if not profile_sets(profile.args, *_GPU_LAYERS):
        out += ["--n-gpu-layers", ALL_LAYERS]
    if len(ctx.gpus) > 1 and not profile_sets(profile.args, *_SPLIT):
        out += ["--split-mode", "layer", "--tensor-split", ",".join("1" for _ in ctx.gpus)]
    return out


def _lora_args(profile: EngineProfile, ctx: LaunchContext) -> list[str]:
    if not profile.adapters:
        return []
    paths = [adapter_path(ctx, a.name, a.path) for a in profile.adapters]
    for name, path in zip((a.name for a in profile.adapters), paths, strict=True):
        if "," in path:
            # --lora takes a comma-separated list; a comma in a path would split it.
            raise refusal(profile, f"adapter {name!r} path {path!r} has a comma, which --lora cannot carry")
    return ["--lora", ",".join(paths), "--lora-init-without-apply"]


def adapter_ids(profile: EngineProfile) -> dict[str, int]:
    """Each adapter's number in the server's load order (`--lora` lists them in the
    profile's order): a request applies one with `lora: [{"id": N, "scale": 1.0}]`."""
    return {a.name: i for i, a in enumerate(profile.adapters)}


def launch(profile: EngineProfile, ctx: LaunchContext, binary: str | None = None) -> Launch:
    """`llama-server` for this profile, on the context's cards or cores."""
    check_context(profile, ctx, needs_gpus=False, spans_nodes=False)
    if profile.runtime_lora:
        raise refusal(profile, "llama-server loads adapters only at start; remove max_loaded_adapters")
    n_slots = slots(profile)
    argv = [binary or BINARY, "--model", model_path(profile, ctx)]
    argv += ["--host", ctx.host, "--port", str(ctx.port)]
    argv += ["--alias", profile.served_model_name]
    argv += ["--metrics", "--no-webui"]
    if not profile_sets(profile.args, *_PARALLEL):
        argv += ["--parallel", str(n_slots)]
    if ctx.context_length > 0 and not profile_sets(profile.args, *_CTX):
        argv += ["--ctx-size", str(ctx.context_length * n_slots)]
    argv += _device_args(profile, ctx)
    if ctx.cpu_cores and not profile_sets(profile.args, *_THREADS):
        argv += ["--threads", str(len(ctx.cpu_cores))]
    argv += _lora_args(profile, ctx)
    if ctx.embeddings:
        argv.append("--embeddings")
    argv += profile.args
    forced = device_env(ctx.gpus)
    if ctx.api_key:
        # llama-server reads the key from LLAMA_API_KEY as well; argv would show it to `ps`.
        forced["LLAMA_API_KEY"] = ctx.api_key
    return Launch(
        engine=ENGINE,
        argv=tuple(argv),
        env=layered_env({}, profile.env, forced),
        metric_names=METRICS,
        metric_prefix=METRIC_PREFIX,
        startup_timeout=profile.startup_timeout,
        cwd=ctx.state_dir,
        health_path=HEALTH_PATH,
        ready=f"GET {HEALTH_PATH} answers 200 (503 while the model loads)",
        metrics_path=METRICS_PATH,
        adapter_ids=adapter_ids(profile),
        stop_grace=STOP_GRACE,
        kill_after_grace=True,
        cpu_affinity=ctx.cpu_cores,
    )

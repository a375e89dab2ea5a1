"""`llmgw sim-engine`: run a simulated inference engine (the catalog's `sim` engine).

It speaks vLLM's, llama-server's or SGLang's HTTP API and metrics, with a deterministic
behaviour model (batching, KV blocks, prefix cache, prefill and decode costs) and
faults chosen on the command line or switched at run time through `POST /sim/fault`.
Every option's default is the one declared in `llmgw.sim.options.SimOptions`.
"""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError

from llmgw.core.problems import describe_validation_error
from llmgw.sim.options import FaultMode, Flavor, SchedulingPolicy, SimOptions

# The engine itself (aiohttp, the behaviour model) is imported when it is run, not here:
# every `llmgw` command loads this module to learn `sim-engine`'s options.

# Each option's default is read from the one declaration, SimOptions.
_DEFAULTS = SimOptions()


def sim_engine(
    *,
    port: Annotated[
        int, typer.Option(help="Port to listen on; 0 picks a free one (printed on stdout).")
    ] = _DEFAULTS.port,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = _DEFAULTS.host,
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="A model name to serve; repeat for aliases (the first labels metrics)."),
    ] = None,
    adapter: Annotated[
        list[str] | None,
        typer.Option("--adapter", help="A LoRA adapter name to serve over the first model; repeatable."),
    ] = None,
    max_loras: Annotated[
        int,
        typer.Option(
            help="Above 0, also load adapters at run time (POST /v1/load_lora_adapter), at most "
            "this many at once, as vLLM does with runtime LoRA updating."
        ),
    ] = _DEFAULTS.max_loras,
    api_key: Annotated[
        list[str] | None,
        typer.Option("--api-key", help="Require this key as a bearer token on /v1 routes; repeatable."),
    ] = None,
    flavor: Annotated[
        Flavor, typer.Option(help="Whose HTTP API and metric names to imitate.")
    ] = _DEFAULTS.flavor,
    seed: Annotated[
        int, typer.Option(help="Seed of the generated text: same seed, same answers.")
    ] = _DEFAULTS.seed,
    scheduling_policy: Annotated[
        SchedulingPolicy,
        typer.Option(
            help="vLLM's --scheduling-policy: fcfs, or priority (requests' `priority` field, lower "
            "first; worse running requests are preempted and recomputed)."
        ),
    ] = _DEFAULTS.scheduling_policy,
    max_seqs: Annotated[
        int, typer.Option(help="Most requests running at once; the rest wait (FCFS unless priority).")
    ] = _DEFAULTS.max_seqs,
    block_size: Annotated[
        int, typer.Option(help="Tokens per KV block (prefix-cache granularity).")
    ] = _DEFAULTS.block_size,
    kv_blocks: Annotated[
        int,
        typer.Option(help="KV cache capacity in blocks, shared by running requests and the prefix cache."),
    ] = _DEFAULTS.kv_blocks,
    prefill_ms_per_token: Annotated[
        float, typer.Option(help="Prefill cost per uncached prompt token, in milliseconds.")
    ] = _DEFAULTS.prefill_ms_per_token,
    decode_ms: Annotated[
        float, typer.Option(help="Base time of one decode step, in milliseconds.")
    ] = _DEFAULTS.decode_ms,
    decode_ms_per_seq: Annotated[
        float, typer.Option(help="Added to each decode step per running request, in milliseconds.")
    ] = _DEFAULTS.decode_ms_per_seq,
    time_scale: Annotated[
        float, typer.Option(help="Multiplies every simulated duration: 0.1 runs ten times faster.")
    ] = _DEFAULTS.time_scale,
    max_model_len: Annotated[
        int, typer.Option(help="Context length: prompt plus answer, in tokens.")
    ] = _DEFAULTS.max_model_len,
    default_max_tokens: Annotated[
        int,
        typer.Option(help="Answer length when a request sets no max_tokens (ends with finish_reason stop)."),
    ] = _DEFAULTS.default_max_tokens,
    embedding_dim: Annotated[
        int, typer.Option(help="Length of /v1/embeddings vectors.")
    ] = _DEFAULTS.embedding_dim,
    prompt_tokens_details: Annotated[
        bool,
        typer.Option(help="Report usage.prompt_tokens_details.cached_tokens, like vLLM's flag of that name."),
    ] = _DEFAULTS.prompt_tokens_details,
    echo: Annotated[
        bool, typer.Option(help="Answer with the last user message (or the prompt), 8 characters a token.")
    ] = _DEFAULTS.echo,
    judge: Annotated[
        str,
        typer.Option(
            help="Answer as a guard model in this format (llamaguard3, qwen3guard, shieldgemma, json): "
            "unsafe when the text holds [[unsafe]] or [[unsafe:CATEGORIES]], unreadable for [[garbage]]."
        ),
    ] = _DEFAULTS.judge,
    eval_wrong: Annotated[
        bool,
        typer.Option(
            help="Answer the prompts of llmgw's built-in eval suites (arithmetic, json-format) wrongly; "
            "without it they get the right answers."
        ),
    ] = _DEFAULTS.eval_wrong,
    legacy_metrics: Annotated[
        bool, typer.Option(help="Serve vLLM's pre-0.9 metric names (gpu_cache_usage_perc, ...).")
    ] = _DEFAULTS.legacy_metrics,
    startup_delay: Annotated[
        float, typer.Option(help="Seconds the engine is not ready: /health and the API answer 503.")
    ] = _DEFAULTS.startup_delay_s,
    fault: Annotated[
        FaultMode, typer.Option(help="Fault to show from the start (switch it via POST /sim/fault).")
    ] = (_DEFAULTS.fault),
    fault_after: Annotated[
        int, typer.Option(help="Requests served normally before the fault applies (exit-after: then exit).")
    ] = _DEFAULTS.fault_after,
    fault_stream_tokens: Annotated[
        int, typer.Option(help="Tokens streamed before hang-stream or cut-stream acts.")
    ] = _DEFAULTS.fault_stream_tokens,
    hang_seconds: Annotated[
        float, typer.Option(help="How long a hang fault holds a connection.")
    ] = _DEFAULTS.hang_s,
    error_rate: Annotated[
        float,
        typer.Option(
            help="Share of generation requests answered 500, spread evenly: 0.2 fails every 5th "
            "(switch it via POST /sim/quality)."
        ),
    ] = _DEFAULTS.error_rate,
    ttft_factor: Annotated[
        float,
        typer.Option(help="The first token comes this many times as late as it would (1: unchanged)."),
    ] = _DEFAULTS.ttft_factor,
    admin_port: Annotated[
        int | None,
        typer.Option(help="Also serve /sim/* on this port (0: a free one); it stays open under refuse."),
    ] = None,
    kv_events_port: Annotated[
        int | None,
        typer.Option(
            help="Publish KV-cache block events in vLLM's ZeroMQ format (PUB, bound on --host) on this port."
        ),
    ] = None,
    max_recent: Annotated[
        int, typer.Option(help="Finished requests kept for GET /sim/requests.")
    ] = _DEFAULTS.recent_requests,
) -> None:
    """Run a simulated inference engine (vLLM, llama-server or SGLang flavored)."""
    try:
        options = SimOptions(
            host=host,
            port=port,
            admin_port=admin_port,
            kv_events_port=kv_events_port,
            models=tuple(model) if model else _DEFAULTS.models,
            adapters=tuple(adapter or ()),
            max_loras=max_loras,
            api_keys=tuple(api_key or ()),
            flavor=flavor,
            seed=seed,
            scheduling_policy=scheduling_policy,
            max_seqs=max_seqs,
            block_size=block_size,
            kv_blocks=kv_blocks,
            max_model_len=max_model_len,
            prefill_ms_per_token=prefill_ms_per_token,
            decode_ms=decode_ms,
            decode_ms_per_seq=decode_ms_per_seq,
            time_scale=time_scale,
            default_max_tokens=default_max_tokens,
            embedding_dim=embedding_dim,
            prompt_tokens_details=prompt_tokens_details,
            legacy_metrics=legacy_metrics,
            echo=echo,
            judge=judge,
            eval_wrong=eval_wrong,
            startup_delay_s=startup_delay,
            fault=fault,
            fault_after=fault_after,
            fault_stream_tokens=fault_stream_tokens,
            hang_s=hang_seconds,
            error_rate=error_rate,
            ttft_factor=ttft_factor,
            recent_requests=max_recent,
        )
    except ValidationError as exc:
        for problem in describe_validation_error(exc, SimOptions):
            typer.echo(f"sim-engine: {problem}", err=True)
        raise typer.Exit(code=2) from None
    from llmgw.sim.runner import run  # noqa: PLC0415 (see the imports)

    try:
        run(options)
    except OSError as exc:
        typer.echo(f"sim-engine: cannot listen on {host}:{port}: {exc.strerror or exc}", err=True)
        raise typer.Exit(code=2) from None

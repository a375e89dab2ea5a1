"""Everything a simulated engine is started with, validated once and frozen.

The sim stands in for vLLM, llama-server and SGLang wherever no GPU is at hand, so its
options are the behaviour model's knobs (batch size, KV blocks, prefill and decode
costs), the HTTP flavor it imitates, and the fault it is told to show. Each default is
declared here once; the command line (`llmgw sim-engine`) and tests build this model.
"""

from __future__ import annotations

import enum
import math

from pydantic import Field, model_validator

from llmgw.core.strict import Strict


class Flavor(enum.StrEnum):
    """Which engine's HTTP surface and metric names the sim serves."""

    VLLM = "vllm"
    LLAMACPP = "llamacpp"
    SGLANG = "sglang"


class FaultMode(enum.StrEnum):
    """A way of failing, chosen explicitly: tests never draw faults at random."""

    NONE = "none"
    REFUSE = "refuse"  # the listening socket is closed: connections are refused
    HTTP_500 = "500"
    HTTP_503 = "503"
    HTTP_429 = "429"
    HANG_HEADERS = "hang-headers"  # the request is read, no status line is ever sent
    HANG_STREAM = "hang-stream"  # headers and a few tokens, then silence
    CUT_STREAM = "cut-stream"  # headers and a few tokens, then the connection is closed
    EXIT_AFTER = "exit-after"  # the process exits once `fault_after` requests are served


class SchedulingPolicy(enum.StrEnum):
    """vLLM's `--scheduling-policy`: first come first served, or by request priority."""

    FCFS = "fcfs"
    PRIORITY = "priority"  # lower `priority` first; worse running requests are preempted


class SimOptions(Strict):
    """A simulated engine's configuration (see `llmgw sim-engine --help` for each field)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    admin_port: int | None = Field(default=None, ge=0, le=65535)
    kv_events_port: int | None = Field(default=None, ge=1, le=65535)
    """Publish KV-cache events in vLLM's ZMQ wire format on this port; None publishes none."""
    models: tuple[str, ...] = ("sim-model",)
    adapters: tuple[str, ...] = ()
    max_loras: int = Field(default=0, ge=0)
    """Above 0, adapters also load at run time through vLLM's /v1/load_lora_adapter,
    at most this many at once (vLLM's --max-loras with runtime LoRA updating)."""
    api_keys: tuple[str, ...] = ()
    """Keys the engine requires as `Authorization: Bearer` on its /v1 routes (vLLM's
    --api-key); empty requires none. Several stand in for a provider's several keys."""
    flavor: Flavor = Flavor.VLLM
    seed: int = 0

    scheduling_policy: SchedulingPolicy = SchedulingPolicy.FCFS
    """With priority, requests carry vLLM's `priority` field and better ones preempt
    worse running ones; with fcfs a nonzero priority is refused, as vLLM refuses it."""
    max_seqs: int = Field(default=64, ge=1)
    block_size: int = Field(default=16, ge=1)
    kv_blocks: int = Field(default=4096, ge=1)
    max_model_len: int = Field(default=8192, ge=2)
    vocab_size: int = Field(default=32000, ge=512)

    prefill_ms_per_token: float = Field(default=0.2, ge=0)
    decode_ms: float = Field(default=10.0, ge=0)
    decode_ms_per_seq: float = Field(default=0.25, ge=0)
    time_scale: float = Field(default=1.0, gt=0)

    default_max_tokens: int = Field(default=128, ge=1)
    embedding_dim: int = Field(default=256, ge=1, le=16384)
    prompt_tokens_details: bool = False
    echo: bool = False
    """Answer with the last user message (or the prompt) instead of generated words."""
    judge: str = ""
    """Answer as a guard model in this format (llamaguard3, qwen3guard, shieldgemma,
    json): unsafe when the text holds `[[unsafe]]` (see llmgw.sim.echo)."""
    eval_wrong: bool = False
    """Answer the built-in eval suites' prompts wrongly (llmgw.sim.eval_answers)."""
    legacy_metrics: bool = False

    startup_delay_s: float = Field(default=0.0, ge=0)
    fault: FaultMode = FaultMode.NONE
    fault_after: int = Field(default=0, ge=0)
    fault_stream_tokens: int = Field(default=1, ge=0)
    hang_s: float = Field(default=300.0, gt=0)
    error_rate: float = Field(default=0.0, ge=0, le=1)
    """Share of generation requests answered 500, spread evenly (llmgw.sim.quality)."""
    ttft_factor: float = Field(default=1.0, ge=1, le=1000)
    """How many times as late the first token comes as it would (llmgw.sim.quality)."""
    recent_requests: int = Field(default=10000, ge=0)

    @model_validator(mode="after")
    def _coherent(self) -> SimOptions:
        if not self.models:
            raise ValueError("models: name at least one model the sim serves, e.g. --model sim-model")
        clash = set(self.models) & set(self.adapters)
        if clash:
            raise ValueError(
                f"adapters: {sorted(clash)[0]!r} is already a model name; give the adapter its own"
            )
        # vLLM refuses to start when one full-length sequence cannot fit in the KV cache;
        # the sim does too, so that a lone request can always be admitted.
        needed = math.ceil(self.max_model_len / self.block_size)
        if needed > self.kv_blocks:
            raise ValueError(
                f"kv_blocks: {self.kv_blocks} blocks of {self.block_size} tokens cannot hold one "
                f"{self.max_model_len}-token sequence; raise --kv-blocks to at least {needed} "
                "or lower --max-model-len"
            )
        if self.judge and self.judge not in ("llamaguard3", "qwen3guard", "shieldgemma", "json"):
            raise ValueError(
                f"judge: {self.judge!r} is not a guard format; "
                "use llamaguard3, qwen3guard, shieldgemma or json"
            )
        if self.admin_port is not None and self.admin_port == self.port and self.port != 0:
            raise ValueError("admin_port: must differ from port, or be left unset")
        return self

    @property
    def served_model(self) -> str:
        """The name metrics are labelled with: the first served name, as vLLM does."""
        return self.models[0]

"""llama-server's `/metrics` (served with `--metrics`), written the way it writes it.

Source (looked up, not guessed): ggml-org/llama.cpp `tools/server/server.cpp`, the
metrics handler of current releases. It writes, with no labels and in this order, the
"counter" group `llamacpp:prompt_tokens_total`, `prompt_seconds_total`,
`tokens_predicted_total`, `tokens_predicted_seconds_total`, `n_decode_total`,
`n_tokens_max` and `n_busy_slots_per_decode`, then the "gauge" group
`llamacpp:prompt_tokens_seconds`, `predicted_tokens_seconds`, `requests_processing` and
`requests_deferred`. The KV-cache gauges (`kv_cache_usage_ratio`, `kv_cache_tokens`)
were removed upstream (llama.cpp#13660), so none is served here: a router must not need
one from llama.cpp.

The text is written by hand because llama-server's is not prometheus_client's: names
such as `n_tokens_max` are typed counter without a `_total` suffix. Its prompt counters
count only the prompt tokens actually processed (a cached prefix is not), and its two
throughput gauges cover the interval since the previous scrape, as llama-server resets
them on each `/metrics` call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from llmgw.sim.metrics import EngineSnapshot
from llmgw.sim.options import SimOptions
from llmgw.sim.stats import EngineStats, Timing


class LlamaCppMetrics:
    """llama-server's unlabelled metrics."""

    def __init__(self, options: SimOptions) -> None:
        del options  # llama-server's metrics carry no model name or engine index
        self._last: tuple[int, float, int, float] = (0, 0.0, 0, 0.0)

    @property
    def buckets(self) -> Mapping[Timing, Sequence[float]]:
        return {}

    def render(self, stats: EngineStats, snapshot: EngineSnapshot) -> bytes:
        prompt_n, prompt_s, predicted_n, predicted_s = self._last
        d_prompt_n = stats.computed_prompt_tokens - prompt_n
        d_prompt_s = stats.prefill_seconds - prompt_s
        d_predicted_n = stats.generation_tokens - predicted_n
        d_predicted_s = stats.decode_seconds - predicted_s
        self._last = (
            stats.computed_prompt_tokens,
            stats.prefill_seconds,
            stats.generation_tokens,
            stats.decode_seconds,
        )
        counters: list[tuple[str, str, float]] = [
            ("prompt_tokens_total", "Number of prompt tokens processed.", stats.computed_prompt_tokens),
            ("prompt_seconds_total", "Prompt process time", stats.prefill_seconds),
            ("tokens_predicted_total", "Number of generation tokens processed.", stats.generation_tokens),
            ("tokens_predicted_seconds_total", "Predict process time", stats.decode_seconds),
            ("n_decode_total", "Total number of llama_decode() calls", int(stats.decode_steps)),
            ("n_tokens_max", "Largest observed n_tokens.", stats.max_sequence_tokens),
            (
                "n_busy_slots_per_decode",
                "Average number of busy slots per llama_decode() call",
                stats.busy_slot_tokens / max(stats.decode_steps, 1.0),
            ),
        ]
        gauges: list[tuple[str, str, float]] = [
            (
                "prompt_tokens_seconds",
                "Average prompt throughput in tokens/s.",
                d_prompt_n / d_prompt_s if d_prompt_n and d_prompt_s > 0 else 0.0,
            ),
            (
                "predicted_tokens_seconds",
                "Average generation throughput in tokens/s.",
                d_predicted_n / d_predicted_s if d_predicted_n and d_predicted_s > 0 else 0.0,
            ),
            ("requests_processing", "Number of requests processing.", snapshot.running),
            ("requests_deferred", "Number of requests deferred.", snapshot.waiting),
        ]
        lines: list[str] = []
        for kind, group in (("counter", counters), ("gauge", gauges)):
            for name, doc, value in group:
                lines.append(f"# HELP llamacpp:{name} {doc}")
                lines.append(f"# TYPE llamacpp:{name} {kind}")
                lines.append(f"llamacpp:{name} {_number(value)}")
        return ("\n".join(lines) + "\n").encode()


def _number(value: float) -> str:
    """A value as llama-server's JSON-to-stream conversion prints it: integers bare."""
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))

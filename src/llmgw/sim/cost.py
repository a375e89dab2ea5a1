"""How long the simulated GPU takes: prefill per uncached prompt token, decode per step.

The two costs that shape every routing decision are modelled and nothing else:

    prefill time = uncached prompt tokens × prefill_ms_per_token
    decode step  = decode_ms + decode_ms_per_seq × running requests

so a cache hit shortens time to first token, and a fuller batch slows every stream. A
real engine's step is dominated by reading the weights (the constant) plus attention
over each running sequence (the slope). `time_scale` multiplies both, so a benchmark can
run the same model ten times faster (0.1) without changing its shape.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CostModel:
    """Simulated durations, in seconds."""

    prefill_ms_per_token: float
    decode_ms: float
    decode_ms_per_seq: float
    time_scale: float = 1.0

    def prefill_s(self, uncached_tokens: int) -> float:
        """Time to compute the KV of `uncached_tokens` prompt tokens (first token included)."""
        return uncached_tokens * self.prefill_ms_per_token * self.time_scale / 1000.0

    def decode_step_s(self, running: int) -> float:
        """Time of one decode step while `running` requests share the batch."""
        return (self.decode_ms + self.decode_ms_per_seq * running) * self.time_scale / 1000.0

"""The smaller parts of a model: latency targets, capabilities, canaries, quality
gates, guard settings and where the weights were published."""

from __future__ import annotations

from datetime import timedelta

from llmgw.core.durations import Duration
from llmgw.core.strict import Strict

ROLE_GUARD = "guard"
"""The role of a model that judges the gateway's traffic instead of serving clients."""


class SLO(Strict):
    """The latency a model is expected to meet: admission holds the lower bands back
    while the recent p99 is past it."""

    ttft_p99: Duration = timedelta(0)
    """Time to the first token that 99 requests in 100 are within."""
    tpot_p99: Duration = timedelta(0)
    """Time per output token after the first that 99 streamed requests in 100 are within."""


class Capabilities(Strict):
    """What a client may ask a model for beyond plain completion. Declared, because no
    engine can be asked what its model can do; `ctl engine-check` verifies tool calling."""

    tools: bool = False
    vision: bool = False
    embeddings: bool = False
    images: bool = False
    """Makes pictures at /v1/images/generations."""
    meshes: bool = False
    """Makes 3D models from a picture, as a job at /v1/3d/generations."""


DEFAULT_CANARY_MIN_REQUESTS = 50
DEFAULT_CANARY_MAX_ERROR_INCREASE = 0.05
DEFAULT_CANARY_MAX_TTFT_RATIO = 1.5


class Canary(Strict):
    """A share of a model's requests sent to a candidate (usually the same model at new
    weights) to compare the two, and when to give up on the candidate: the gateway's
    router splits the traffic and rolls the candidate back (llmgw.router.canary)."""

    model: str = ""
    """The candidate, a catalog model clients cannot name themselves."""
    percent: int = 0
    """Share of requests sent to it, 0 to 100."""
    min_requests: int = 0
    """Requests of its own the candidate must have served before it is judged; 0 is 50."""
    max_error_increase: float = 0
    """Error rate above this model's at which it is rolled back (0.05 is five points); 0 is 0.05."""
    max_ttft_ratio: float = 0
    """Mean time to first token, as a multiple of this model's, that rolls it back; 0 is 1.5."""

    def limits(self) -> tuple[int, float, float]:
        """min_requests, max_error_increase and max_ttft_ratio with defaults filled in."""
        return (
            self.min_requests if self.min_requests > 0 else DEFAULT_CANARY_MIN_REQUESTS,
            self.max_error_increase if self.max_error_increase > 0 else DEFAULT_CANARY_MAX_ERROR_INCREASE,
            self.max_ttft_ratio if self.max_ttft_ratio > 0 else DEFAULT_CANARY_MAX_TTFT_RATIO,
        )


class EvalGate(Strict):
    """A quality suite the model must pass (`llmgw ctl eval`, llmgw.evals): as a canary
    candidate, a score under `min_score` holds its split at 0."""

    suite: str = ""
    """A suite in control.eval_dir, or one llmgw carries (arithmetic, json-format)."""
    min_score: float = 0
    """The passing score, 0 to 1; 0 is the suite's own threshold."""
    judge: str = ""
    """The model that grades rubric cases, instead of the one the suite names."""


class GuardModel(Strict):
    """How a guard model's answers are read (`format`) and which of its verdicts count
    (`categories`)."""

    format: str = ""
    """qwen3guard, llamaguard3, shieldgemma or json (see llmgw.catalog.guard_formats)."""
    categories: tuple[str, ...] = ()
    """The only categories of this judge's verdicts that count (compared without case;
    empty: every unsafe verdict): llamaguard3's codes (S1…S14), qwen3guard's category
    names, json's categories; for shieldgemma, the policies it is asked about, which a
    Yes carries."""


class OriginFile(Strict):
    """One weights file of an origin, with the checksum the registry published."""

    path: str = ""
    sha256: str = ""
    bytes: int = 0


class PreviousOrigin(Strict):
    """A model's source before the last `llmgw ctl model promote`, which `rollback` goes
    back to (llmgw.catalog.lifecycle)."""

    source: str = ""
    revision: str = ""
    files: tuple[OriginFile, ...] = ()


class Origin(Strict):
    """The registry repository the weights came from, at which commit: what lets the
    control plane see that different weights have been published since."""

    repo: str = ""
    """owner/name."""
    revision: str = ""
    files: tuple[OriginFile, ...] = ()
    """A new commit that leaves these alone (a README edited) is not an update."""
    previous: PreviousOrigin | None = None


def short_revision(revision: str) -> str:
    """A commit as a person writes it: its first eight characters."""
    return revision[:8]

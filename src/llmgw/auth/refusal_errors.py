"""The errors the gate answers a refused request with, made from what was judged: a
budget spent (402-style `insufficient_quota`), a request too large for its token limit
ever to pass (400), a rate limit reached (429 with OpenAI's `x-ratelimit-*` headers).

Pure: the gate counts and emits; these only word the refusal, so each message names
the limit, its scope and when to try again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime

from llmgw.auth import windows
from llmgw.auth.budgets import BudgetRule, period_end, period_start
from llmgw.auth.limiter import REQUESTS, Dimension, LimitRule, Verdict
from llmgw.errors import BadRequest, InsufficientQuota, RateLimitExceeded

Check = tuple[Dimension, LimitRule, int, Verdict]
"""One limit judged for a request: dimension, rule, amount asked, verdict."""


def budget_spent(spent: BudgetRule, now: float) -> InsufficientQuota:
    renews = period_end(spent.period, now)
    return InsufficientQuota(
        f"the {spent.source} budget of {spent.scope} for this {spent.period} is spent; "
        f"it renews at {datetime.fromtimestamp(renews, UTC):%Y-%m-%d %H:%M} UTC",
        code="insufficient_quota",
        retry_after=max(renews - now, 1.0),
    )


def budget_spent_event(spent: BudgetRule, now: float) -> tuple[str, dict[str, object]]:
    """The `budget.spent` notification's key and data. One key per budget and period:
    every gateway refusing under it emits the same, and the outbox delivers it once."""
    begun = period_start(spent.period, now)
    return f"{spent.scope}:{spent.period}:{begun}", {
        "scope": spent.scope,
        "source": spent.source,
        "period": spent.period,
        "budget": spent.budget_micros / 1_000_000,
        "period_start": begun,
        "renews_at": period_end(spent.period, now),
    }


def too_large(tpm: LimitRule, cost: int) -> BadRequest:
    return BadRequest(
        f"this request is estimated at {cost} tokens (prompt and max_tokens), more than the "
        f"{tpm.limit} tokens a minute the {tpm.source} limit of {tpm.scope} allows: it can never "
        "pass; shorten the prompt or lower max_tokens",
        param="max_tokens",
        code="request_too_large_for_limit",
    )


def rate_limited(checks: Sequence[Check]) -> RateLimitExceeded:
    """The 429 for `checks`, at least one refused: the limit to wait longest for named."""
    refused = [check for check in checks if not check[3].allowed]
    dim, rule, _, verdict = max(refused, key=lambda check: check[3].retry_after)
    unit = "requests" if dim == REQUESTS else "tokens"
    return RateLimitExceeded(
        f"rate limit reached: {rule.limit} {unit} a minute ({rule.source} limit of {rule.scope}); "
        f"retry in {math.ceil(verdict.retry_after)}s",
        code="rate_limit_exceeded",
        retry_after=max(verdict.retry_after, 0.001),
        headers=rate_limit_headers(checks),
    )


def rate_limit_headers(checks: Sequence[Check]) -> list[tuple[str, str]]:
    """OpenAI's x-ratelimit-* headers for the limits judged for a refused request."""
    out: list[tuple[str, str]] = []
    for dim, rule, _amount, verdict in checks:
        unit = "requests" if dim == REQUESTS else "tokens"
        remaining = max(int(rule.limit - verdict.estimate), 0)
        out.append((f"x-ratelimit-limit-{unit}", str(rule.limit)))
        out.append((f"x-ratelimit-remaining-{unit}", str(remaining)))
        out.append((f"x-ratelimit-reset-{unit}", windows.format_reset(max(verdict.reset_after, 0.0))))
    return out

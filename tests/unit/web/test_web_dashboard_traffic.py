"""The Traffic page's rows, summed per model from the gateway's own counters."""

from __future__ import annotations

from llmgw.router.metrics import GatewayMetrics
from llmgw.web.dashboard_traffic import traffic_rows


def test_requests_errors_ttft_and_tokens_per_model() -> None:
    metrics = GatewayMetrics()
    for status in (200, 200, 502):
        metrics.answered("/v1/chat/completions", "chat", status, 0.3)
    metrics.refused("/v1/chat/completions", "chat", 429, "rate_limited")
    metrics.refused("/v1/chat/completions", "", 404, "not_found")  # no model: not a row
    metrics.served("/v1/models", 200)
    for seconds in (0.02, 0.04, 0.2):
        metrics.first_token("chat", seconds)
    metrics.counted_tokens("chat", 100, 30)
    metrics.counted_tokens("embed", 50, 0)
    rows = {row.model: row for row in traffic_rows(metrics)}
    assert set(rows) == {"chat", "embed"}
    chat = rows["chat"]
    assert (chat.requests, chat.errors) == (4, 2)
    assert chat.ttft_mean_ms == round((0.02 + 0.04 + 0.2) / 3 * 1000, 1)
    assert chat.ttft_p90_ms == 250.0  # the 0.2 s answer's bucket, bounded at 0.25 s
    assert (chat.prompt_tokens, chat.completion_tokens) == (100, 30)
    embed = rows["embed"]
    assert (embed.requests, embed.ttft_mean_ms, embed.ttft_p90_ms) == (0, None, None)

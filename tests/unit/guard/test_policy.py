"""Which rules a caller gets: the default, plus the nearest level's attachments; and the
input stage over request bodies (slots, redaction in place, the refusal)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from llmgw.config.guard import Guard
from llmgw.errors import BadRequest
from llmgw.guard import Guardrails, PolicySet

GUARD = Guard.model_validate(
    {
        "default": "base",
        "policies": [
            {"name": "base", "checks": [{"type": "pii", "action": "redact", "stage": "both"}]},
            {"name": "strict", "checks": [{"type": "secrets", "action": "block"}]},
            {"name": "team", "checks": [{"type": "regex", "patterns": ["zeus"], "action": "flag"}]},
        ],
    }
)


def test_default_alone_without_attachments() -> None:
    policies = PolicySet.from_settings(GUARD)
    applied = policies.for_scopes((("project", "p"),))
    assert [r.policy for r in applied.input] == ["base"]
    assert [r.policy for r in applied.output] == ["base"]


def test_nearest_level_with_an_attachment_adds_to_the_default() -> None:
    policies = PolicySet.from_settings(GUARD)
    policies.replace_attachments({("project", "p"): ("strict",), ("team", "t"): ("team",)})
    in_p = policies.for_scopes((("project", "p"), ("team", "t")))
    assert [r.policy for r in in_p.input] == ["base", "strict"]
    in_other = policies.for_scopes((("project", "q"), ("team", "t")))
    assert [r.policy for r in in_other.input] == ["base", "team"]
    elsewhere = policies.for_scopes((("project", "q"), ("team", "u")))
    assert [r.policy for r in elsewhere.input] == ["base"]


def test_no_policy_is_inactive() -> None:
    assert not PolicySet.from_settings(Guard()).active
    assert PolicySet.from_settings(GUARD).active


def test_input_stage_redacts_in_place_and_blocks_naming_the_check() -> None:
    policies = PolicySet.from_settings(GUARD)
    policies.replace_attachments({("project", "p"): ("strict",)})
    guard = Guardrails(policies)
    body: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "mail a@b.example"}]},
            {"role": "user", "content": "card 4111111111111111"},
        ]
    }
    assert asyncio.run(guard.check_request("chat", body, guard.applied()))
    assert body["messages"][0]["content"][0]["text"] == "mail [EMAIL]"
    assert body["messages"][1]["content"] == "card [CARD]"
    with pytest.raises(BadRequest) as caught:
        asyncio.run(
            guard.check_request(
                "embeddings", {"input": ["ok", "AKIAIOSFODNN7EXAMPLE"]}, guard.applied((("project", "p"),))
            )
        )
    assert caught.value.code == "content_filter"
    assert "'strict'" in caught.value.message
    assert "AKIA" not in caught.value.message
    assert guard.counts.checks[("strict", "secrets", "input", "block", "hit")] == 1


def test_a_clean_long_text_is_scanned_once_per_rule_set() -> None:
    guard = Guardrails(PolicySet.from_settings(GUARD))
    system = "You are a helpful assistant for the finance team. " * 4
    for _ in range(2):
        body = {
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": "a@b.example x"}]
        }
        assert asyncio.run(guard.check_request("chat", body, guard.applied()))
        assert body["messages"][1]["content"] == "[EMAIL] x"
    cached = guard._clean[id(guard.applied().input)][1]
    assert list(cached) == [system]

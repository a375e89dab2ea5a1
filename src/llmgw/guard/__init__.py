"""Guardrails: checks on the gateway's traffic (personal data, secrets, an operator's
patterns, judge models), the policies that say which run where, and what a hit does
(block, redact, flag). Imports only the shared layers (config, errors); the router
calls `Guardrails` and supplies the `Judge`."""

from llmgw.catalog.guard_formats import FORMATS, known_format
from llmgw.guard.detectors import Finding, find
from llmgw.guard.engine import CONTENT_FILTER, FLAG_TAG, Guardrails, flag_tag, refusal
from llmgw.guard.inspect_text import Hit, TextResult, inspect, redact
from llmgw.guard.judging import Judge
from llmgw.guard.policy import NOTHING, Applied, PolicySet, Rule, compile_policy
from llmgw.guard.stream import HOLD_CHARS, StreamScanner
from llmgw.guard.verdicts import Unreadable, Verdict, read_verdict

__all__ = [
    "CONTENT_FILTER",
    "FLAG_TAG",
    "FORMATS",
    "HOLD_CHARS",
    "NOTHING",
    "Applied",
    "Finding",
    "Guardrails",
    "Hit",
    "Judge",
    "PolicySet",
    "Rule",
    "StreamScanner",
    "TextResult",
    "Unreadable",
    "Verdict",
    "compile_policy",
    "find",
    "flag_tag",
    "inspect",
    "known_format",
    "read_verdict",
    "redact",
    "refusal",
]

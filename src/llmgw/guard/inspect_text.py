"""Running a stage's text rules (`pii`, `secrets`, `regex`) over one text: the hits,
the first block, and the text with what was redacted replaced by typed placeholders.

Pure: text and rules in, a `TextResult` out. The judge (`model`) rules are asked for
the whole of a stage's text elsewhere (`llmgw.guard.judging`), once per request.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmgw.guard.detectors import Finding, find
from llmgw.guard.gate import gate_for
from llmgw.guard.policy import Rule

BLOCK = "block"
REDACT = "redact"
FLAG = "flag"


@dataclass(frozen=True, slots=True)
class Hit:
    """A rule that matched (or failed, for a judge): what the metrics and the refusal
    name. Never the matched text."""

    policy: str
    check: str
    action: str


@dataclass(slots=True)
class TextResult:
    text: str
    hits: list[Hit]
    blocked: Hit | None = None
    changed: bool = False


def placeholder(label: str) -> str:
    return f"[{label}]"


def redact(text: str, findings: list[Finding]) -> str:
    """`text` with each finding replaced by its placeholder (overlaps merged: the
    first to start covers the rest)."""
    findings = sorted(findings, key=lambda f: (f.start, -f.end))
    parts: list[str] = []
    at = 0
    for f in findings:
        if f.end <= at:
            continue
        start = max(f.start, at)
        parts.append(text[at:start])
        if start == f.start:
            parts.append(placeholder(f.label))
        at = f.end
    parts.append(text[at:])
    return "".join(parts)


def text_rules(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    return tuple(r for r in rules if r.detectors)


def inspect(text: str, rules: tuple[Rule, ...]) -> TextResult:
    """Every text rule over `text`, in order; stops at the first block."""
    hits: list[Hit] = []
    cut: list[Finding] = []
    checked = [r for r in rules if r.detectors]
    # One RE2 pass says which detectors can match; text with none is done.
    live = gate_for([r.detectors for r in checked]).live(text)
    for rule, detectors in zip(checked, live, strict=True):
        if not detectors:
            continue
        found = find(rule.check, detectors, text)
        if not found:
            continue
        hit = Hit(rule.policy, rule.check, rule.action)
        hits.append(hit)
        if rule.action == BLOCK:
            return TextResult(text, hits, hit)
        if rule.action == REDACT:
            cut.extend(found)
    if cut:
        return TextResult(redact(text, cut), hits, None, True)
    return TextResult(text, hits)


def findings_for(text: str, rules: tuple[Rule, ...]) -> list[tuple[Rule, list[Finding]]]:
    """Each text rule's findings in `text` (rules with none left out), for the stream
    scanner, which needs the positions to decide what may be released."""
    out: list[tuple[Rule, list[Finding]]] = []
    checked = [r for r in rules if r.detectors]
    live = gate_for([r.detectors for r in checked]).live(text)
    for rule, detectors in zip(checked, live, strict=True):
        if detectors:
            found = find(rule.check, detectors, text)
            if found:
                out.append((rule, found))
    return out

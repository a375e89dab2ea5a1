"""Micro benchmark of the guard's text checks: pii + secrets + three regex patterns over
1 KB and 32 KB of text, in process (bench/guard/README.md says how to read it).

Usage: .venv/bin/python bench/guard/micro_scan.py [--out FILE]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

import orjson

from llmgw.config.guard import GuardPolicy
from llmgw.guard import Finding, Rule, TextResult, compile_policy, find, inspect, redact

_WORDS = [
    "the",
    "gateway",
    "routes",
    "every",
    "request",
    "to",
    "a",
    "replica",
    "and",
    "the",
    "answer",
    "streams",
    "back",
    "to",
    "the",
    "client",
    "while",
    "usage",
    "is",
    "accounted",
    "off",
    "the",
    "hot",
    "path",
    "so",
    "the",
    "operator",
    "sees",
    "who",
    "used",
    "what",
    "and",
    "when",
    "the",
    "budget",
    "ends",
    "models",
    "are",
    "placed",
    "on",
    "nodes",
    "with",
    "enough",
    "memory",
    "and",
    "the",
    "scheduler",
    "keeps",
    "the",
    "queue",
    "short",
]


def prose(size: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        if rng.random() < 0.05:
            word = f"{word}, {rng.randint(1, 2026)}"
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


def with_findings(size: int) -> str:
    base = prose(size)
    extra = (
        " mail john.doe@example.com card 4111 1111 1111 1111 key sk-abcdefghijklmnopqrstuvwx "
        "call +44 20 7946 0958 "
    )
    return base[: size - len(extra)] + extra


def per_call_us(fn: Callable[[], object], budget_s: float = 1.0) -> float:
    """Median of 7 rounds, each as many calls as fit in budget_s / 7."""
    rounds: list[float] = []
    n = 1
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    n = max(1, int(budget_s / 7 / once))
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        rounds.append((time.perf_counter() - start) / n * 1e6)
    rounds.sort()
    return rounds[3]


def inspect_each(text: str, rules: tuple[Rule, ...]) -> TextResult:
    """The scan without its one-pass gate: every detector searched on its own (what
    `inspect` did before llmgw.guard.gate), timed beside it as the before."""
    cut: list[Finding] = []
    for rule in rules:
        if rule.detectors:
            found = find(rule.check, rule.detectors, text)
            if found and rule.action == "redact":
                cut.extend(found)
    return TextResult(redact(text, cut) if cut else text, [])


def paired_us(
    first: Callable[[], object], second: Callable[[], object], rounds: int = 15, budget_s: float = 1.5
) -> tuple[float, float]:
    """Per-call µs of two functions, their rounds alternated (so a load change on the
    shared machine hits both alike), each the median of `rounds`."""
    calls = []
    for fn in (first, second):
        fn()  # the first call compiles (the gate's automaton): not timed
        start = time.perf_counter()
        fn()
        once = max(time.perf_counter() - start, 1e-7)
        calls.append(max(1, int(budget_s / 2 / rounds / once)))
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for fn, n, out in ((first, calls[0], times[0]), (second, calls[1], times[1])):
            start = time.perf_counter()
            for _ in range(n):
                fn()
            out.append((time.perf_counter() - start) / n * 1e6)
    return sorted(times[0])[rounds // 2], sorted(times[1])[rounds // 2]


def bench_rules() -> tuple[Rule, ...]:
    """The issue's policy: pii + secrets + three regex patterns, all redact, input stage."""
    policy = compile_policy(
        GuardPolicy.model_validate(
            {
                "name": "bench",
                "checks": [
                    {"type": "pii", "action": "redact"},
                    {"type": "secrets", "action": "redact"},
                    {
                        "type": "regex",
                        "action": "redact",
                        "patterns": [r"(?i)project zeus", r"\bconfidential\b", r"ACME-\d{4}"],
                    },
                ],
            }
        )
    )
    return policy.input


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    rules = bench_rules()
    cases = {
        "1 KB prose, no finding": prose(1024),
        "1 KB with 4 findings": with_findings(1024),
        "32 KB prose, no finding": prose(32 * 1024),
        "32 KB with 4 findings": with_findings(32 * 1024),
        "32 KB adversarial: digits": "4" * 32 * 1024,
        "32 KB adversarial: a@a.a repeated": "a@a." * 8 * 1024,
        "32 KB adversarial: sk- and spaces": ("sk-" + "a" * 19 + " ") * 1400,
        "32 KB adversarial: +1 1 1": "+1 1 " * 6 * 1024,
    }
    # The reference, timed in the same run so the ratio holds on a loaded machine: the
    # gateway decoding a request body of the same size (orjson, as parse_request does).
    lines = [
        "| text | µs per scan | × decoding a request body of that size"
        " | µs without the gate (before) | × decoding | before ÷ after |",
        "|---|---|---|---|---|---|",
    ]
    for name, text in cases.items():
        body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": text}]})
        reference = per_call_us(lambda b=body: orjson.loads(b))  # type: ignore[misc]
        scan, each = paired_us(
            lambda t=text: inspect(t, rules),  # type: ignore[misc]
            lambda t=text: inspect_each(t, rules),  # type: ignore[misc]
        )
        assert inspect(text, rules).text == inspect_each(text, rules).text, name
        lines.append(
            f"| {name} | {scan:.1f} | {scan / reference:.1f} | {each:.1f} | {each / reference:.1f}"
            f" | {each / scan:.1f} |"
        )
    report = "\n".join(lines)
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report + "\n")


if __name__ == "__main__":
    main()

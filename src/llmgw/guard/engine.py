"""The guardrails as the request path uses them: the rules for a caller, the input
stage on a request body, the output stage on an answer, a scanner for a stream.

Built once by the server from the settings and the catalog; the router holds one and
calls it only when `active` (no policy at all costs one attribute read per request).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from llmgw.errors import BadRequest
from llmgw.guard.counts import CLEAN, HIT, GuardCounts
from llmgw.guard.inspect_text import FLAG, Hit, inspect, text_rules
from llmgw.guard.judging import Judge, judge_all
from llmgw.guard.policy import INPUT, NOTHING, OUTPUT, Applied, PolicySet, Rule
from llmgw.guard.slots import Slot, answer_slots, request_slots
from llmgw.guard.stream import StreamScanner

CONTENT_FILTER = "content_filter"
CLEAN_CACHE_ENTRIES = 1024
"""Texts remembered as clean per rule set: a conversation re-sends its system prompt and
history every turn, and those are scanned once, not every turn."""
CLEAN_CACHE_MIN_CHARS = 64
CLEAN_CACHE_MAX_CHARS = 16384


FLAG_TAG = "guard"
"""The usage record's tag that names what flagged a request: `policy/check,…`."""


def flag_tag(flags: list[Hit], before: str = "") -> str:
    """The FLAG_TAG value for `flags`, added to one the record already has."""
    named = [n for n in before.split(",") if n]
    for hit in flags:
        name = f"{hit.policy}/{hit.check}"
        if name not in named:
            named.append(name)
    return ",".join(named)


def refusal(hit: Hit, stage: str) -> BadRequest:
    """The 400 for a block: which policy and check, never what matched."""
    what = "request" if stage == INPUT else "answer"
    return BadRequest(
        f"the {what} was refused by guard policy {hit.policy!r} (check {hit.check})", code=CONTENT_FILTER
    )


class Guardrails:
    """One gateway process's guardrails."""

    def __init__(
        self,
        policies: PolicySet,
        formats: Mapping[str, str] | None = None,
        judge: Judge | None = None,
        clock: Callable[[], float] = time.monotonic,
        narrowed: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.policies = policies
        self.formats: Mapping[str, str] = formats or {}
        """Judge model → its guard.format."""
        self.narrowed: Mapping[str, frozenset[str]] = narrowed or {}
        """Judge model → its guard.categories (lowercase): the only ones that count."""
        self.judge = judge
        self.counts = GuardCounts()
        self._clock = clock
        # id(rules) → (the rules, kept so the id is not reused; the texts found clean).
        self._clean: dict[int, tuple[tuple[Rule, ...], dict[str, None]]] = {}

    @property
    def active(self) -> bool:
        return self.policies.active

    def applied(self, scopes: tuple[tuple[str, str], ...] = ()) -> Applied:
        return self.policies.for_scopes(scopes) if self.policies.active else NOTHING

    def _texts(self, slots: list[Slot], rules: tuple[Rule, ...], stage: str) -> tuple[bool, list[Hit]]:
        """The text rules over every slot, rewriting redacted ones in place; raises the
        refusal on a block. Returns whether anything changed, and the hits."""
        tr = text_rules(rules)
        changed = False
        hits: list[Hit] = []
        clean = self._clean_texts(rules) if stage == INPUT else None
        for holder, key in slots:
            text = holder[key]
            cacheable = clean is not None and CLEAN_CACHE_MIN_CHARS <= len(text) <= CLEAN_CACHE_MAX_CHARS
            if cacheable and clean is not None and text in clean:
                continue
            result = inspect(text, tr)
            if cacheable and clean is not None and not result.hits:
                if len(clean) >= CLEAN_CACHE_ENTRIES:
                    del clean[next(iter(clean))]  # the oldest
                clean[text] = None
            for hit in result.hits:
                if hit not in hits:
                    hits.append(hit)
            if result.blocked is not None:
                self._tally(tr, hits, stage)
                raise refusal(result.blocked, stage)
            if result.changed:
                holder[key] = result.text
                changed = True
        self._tally(tr, hits, stage)
        return changed, hits

    def _clean_texts(self, rules: tuple[Rule, ...]) -> dict[str, None]:
        found = self._clean.get(id(rules))
        if found is None or found[0] is not rules:
            if len(self._clean) >= CLEAN_CACHE_ENTRIES:
                self._clean.clear()
            found = self._clean[id(rules)] = (rules, {})
        return found[1]

    def _tally(self, rules: tuple[Rule, ...], hits: list[Hit], stage: str) -> None:
        add = self.counts.add
        for r in rules:
            verdict = HIT if Hit(r.policy, r.check, r.action) in hits else CLEAN
            add(r.policy, r.check, stage, r.action, verdict)

    async def _judge(
        self, rules: tuple[Rule, ...], messages: list[dict[str, str]], stage: str, flags: list[Hit] | None
    ) -> None:
        judged = tuple(r for r in rules if r.judge)
        if not judged:
            return
        if self.judge is None:
            # Refused at load when a policy names no known judge; kept for tests' sake.
            raise refusal(Hit(judged[0].policy, judged[0].check, "block"), stage)
        outcome = await judge_all(
            self.judge, self.formats, judged, messages, stage, self.counts, self._clock, self.narrowed
        )
        if outcome.blocked is not None:
            raise refusal(outcome.blocked, stage)
        if flags is not None:
            flags.extend(h for h in outcome.hits if h.action == FLAG)

    async def check_request(
        self, kind: str, body: dict[str, Any], applied: Applied, flags: list[Hit] | None = None
    ) -> bool:
        """The input stage over a decoded request body (rewritten in place when a rule
        redacts); raises the 400 on a block. True when the body changed; what flagged
        it is added to `flags`."""
        rules = applied.input
        if not rules:
            return False
        slots = request_slots(kind, body)
        changed, hits = self._texts(slots, rules, INPUT)
        if flags is not None:
            flags.extend(h for h in hits if h.action == FLAG)
        if any(r.judge for r in rules):
            text = "\n".join(h[k] for h, k in slots)
            await self._judge(rules, [{"role": "user", "content": text}], INPUT, flags)
        return changed

    async def check_answer(
        self, raw: bytes, prompt: str, applied: Applied, flags: list[Hit] | None = None
    ) -> bytes:
        """The output stage over a whole answer's bytes: the same bytes when nothing was
        redacted, re-encoded when something was; raises the 400 on a block. What
        flagged it is added to `flags`."""
        rules = applied.output
        if not rules:
            return raw
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
        if not isinstance(body, dict):
            return raw
        slots = answer_slots(body)
        changed, hits = self._texts(slots, rules, OUTPUT)
        if flags is not None:
            flags.extend(h for h in hits if h.action == FLAG)
        if any(r.judge for r in rules):
            text = "\n".join(h[k] for h, k in slots)
            messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": text}]
            await self._judge(rules, messages, OUTPUT, flags)
        return orjson.dumps(body) if changed else raw

    def scanner(self, applied: Applied) -> StreamScanner | None:
        """A scanner for one streamed answer, None when no rule looks at answers."""
        rules = text_rules(applied.output)
        judges = tuple(r for r in applied.output if r.judge)
        return StreamScanner(rules, judges) if rules or judges else None

    async def judge_stream(self, scanner: StreamScanner, prompt: str) -> bytes:
        """Asks the stream's judges about the answer so far (when `scanner.judge_due()`);
        returns b"" to go on, or the closing events of a block, to send instead of what
        the scanner released last."""
        messages = [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": scanner.answer_text()},
        ]
        if self.judge is None:
            # Refused at load when a policy names no known judge; kept for tests' sake.
            rule = scanner.judges[0]
            return scanner.judged((), Hit(rule.policy, rule.check, "block"))
        outcome = await judge_all(
            self.judge,
            self.formats,
            scanner.judges,
            messages,
            OUTPUT,
            self.counts,
            self._clock,
            self.narrowed,
        )
        return scanner.judged(outcome.hits, outcome.blocked)

    def stream_done(self, scanner: StreamScanner) -> None:
        """Counts what a stream's scanner found, once the stream ended."""
        self._tally(scanner.rules, scanner.hits, OUTPUT)

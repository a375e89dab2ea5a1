"""One pass over a text that says which detectors can match in it.

Running ~25 detectors one by one costs ~25 C-level searches plus Python's per-call
overhead, most of it spent finding nothing. RE2's set matching (google-re2) runs every
detector's *gate* — a looser pattern that matches wherever the detector could — as one
automaton in one linear pass: a text that trips no gate is done, and one that trips
some runs only those detectors (the exact patterns, lookarounds and check digits as
before). RE2 never backtracks, so the pass is linear whatever the input.

A gate must match wherever its detector does (a superset), or a finding is missed:

- the built-in detectors' gates are written beside them (`llmgw.guard.detectors`):
  their patterns with lookarounds and trailing `\\b` dropped and bounds loosened, `\\d`
  as `\\p{Nd}` (Python's `\\d` is Unicode's), so they hold for any text;
- an operator's pattern is its own gate, but RE2 and Python read some syntax
  differently (`\\s` takes `\\v` in Python only, `$` before a final newline, `{,n}`,
  Unicode classes): it gates ASCII text only, and only if it uses none of the
  constructs read differently (`portable`); otherwise, or when RE2 cannot compile it
  (lookarounds, back-references), the detector always runs.

A text RE2 cannot take (a lone surrogate) runs every detector.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import re2

if TYPE_CHECKING:
    from llmgw.guard.detectors import Detector

# Constructs Python's `re` and RE2 read differently (on ASCII text): an operator
# pattern holding one is not gated. `\s`/`\S` (\v, \x1c-\x1f), `$` (before a trailing
# newline), `{,n}` (a literal in RE2), `\Z`, numbered escapes (octal, back-references),
# `[:` (a POSIX class in RE2, characters in Python); and any non-ASCII character (the
# two case-fold tables differ).
_NOT_PORTABLE = re.compile(r"\$|\\[sSZ0-9]|\{,|\[:")

# The automaton's memory: RE2's set matching has no fallback when its DFA runs out, so
# it gets room for far more states than these patterns build.
_MAX_MEM = 64 << 20


def portable(pattern: str) -> bool:
    """Whether `pattern` means the same to RE2 as to Python's `re` on ASCII text, as far
    as this module can tell (conservative: unsure is no)."""
    return pattern.isascii() and _NOT_PORTABLE.search(pattern) is None


def _compiled(patterns: list[str]) -> tuple[re2.Set | None, list[int]]:
    """A set of the patterns RE2 takes, and for each set index the pattern's own."""
    if not patterns:
        return None, []
    options = re2.Options()
    options.max_mem = _MAX_MEM
    options.log_errors = False  # a pattern RE2 refuses is expected: it runs ungated
    out = re2.Set.SearchSet(options)
    index: list[int] = []
    for i, p in enumerate(patterns):
        try:
            out.Add(p)
        except re2.error:
            continue
        index.append(i)
    if not index:
        return None, []
    out.Compile()
    return out, index


Slot = tuple[int, int]
"""(group, position): a detector's place among a stage's detector tuples."""


class Gate:
    """The gates of a stage's detector tuples (one per rule), compiled once."""

    __slots__ = ("_always", "_always_unicode", "_any", "_any_slots", "_ascii", "_ascii_slots", "_groups")

    def __init__(self, groups: Sequence[tuple[Detector, ...]]) -> None:
        self._groups = tuple(tuple(g) for g in groups)
        # One pattern per detector, however many rules hold it; each knows its slots.
        slots: dict[int, list[Slot]] = {}
        dets: dict[int, Detector] = {}
        for gi, group in enumerate(self._groups):
            for di, d in enumerate(group):
                slots.setdefault(id(d), []).append((gi, di))
                dets.setdefault(id(d), d)
        # Gates that hold for any text, and (a larger set) those for ASCII text.
        any_text = [d for d in dets.values() if d.gate and not d.gate_ascii_only]
        ascii_text = [d for d in dets.values() if d.gate]
        self._any, idx = _compiled([d.gate for d in any_text])
        self._any_slots = [slots[id(any_text[i])] for i in idx]
        self._ascii, idx = _compiled([d.gate for d in ascii_text])
        self._ascii_slots = [slots[id(ascii_text[i])] for i in idx]
        gated_any = {s for group in self._any_slots for s in group}
        gated_ascii = {s for group in self._ascii_slots for s in group}
        every = [s for group in slots.values() for s in group]
        self._always = frozenset(s for s in every if s not in gated_ascii)
        self._always_unicode = frozenset(s for s in every if s not in gated_any)

    def _pick(self, chosen: frozenset[Slot] | set[Slot]) -> list[tuple[Detector, ...]]:
        out: list[list[Detector]] = [[] for _ in self._groups]
        for gi, di in sorted(chosen):
            out[gi].append(self._groups[gi][di])
        return [tuple(g) for g in out]

    def live(self, text: str) -> list[tuple[Detector, ...]]:
        """For each group, its detectors that can match in `text`, in their order."""
        if text.isascii():
            automaton, slots, always = self._ascii, self._ascii_slots, self._always
            data = text.encode("ascii")
        else:
            automaton, slots, always = self._any, self._any_slots, self._always_unicode
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:
                return list(self._groups)
        hits = automaton.Match(data) if automaton is not None else None
        if not hits:
            if not always:
                return [() for _ in self._groups]
            return self._pick(always)
        chosen = set(always)
        for i in hits:
            chosen.update(slots[i])
        return self._pick(chosen)


_GATES: dict[tuple[int, ...], tuple[tuple[tuple[Detector, ...], ...], Gate]] = {}
_MAX_GATES = 1024


def gate_for(groups: Sequence[tuple[Detector, ...]]) -> Gate:
    """The gate of a stage's detector tuples (one per rule), compiled at its first use.

    Keyed by the tuples' identities: each is built once per compiled policy (pii's and
    secrets' are module constants), while the tuples of rules around them are rebuilt
    per request. The entry holds the tuples, so no id in a key is reused while it is
    cached; a reloaded policy's new tuples get a gate of their own."""
    key = tuple(map(id, groups))
    entry = _GATES.get(key)
    if entry is not None:
        return entry[1]
    gate = Gate(groups)
    if len(_GATES) >= _MAX_GATES:
        _GATES.clear()
    _GATES[key] = (tuple(groups), gate)
    return gate

"""What `pii`, `secrets` and `regex` checks find: typed patterns over text.

Each detector is one compiled expression with a cheap prefilter (a literal that must
occur, or a character class tested at C speed) and, where the scheme has one, a
validator (a check digit). Text with none of the prefilters' literals costs a few
substring searches; prose without digits never runs the number patterns.

Python's `re` backtracks, so no expression here nests quantifiers or lets two
alternatives match the same text at the same place: each is linear in the text, and
tests/unit/guard feed them adversarial inputs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from llmgw.guard.digits import iban_valid, luhn_valid, only_digits, ssn_valid, tckn_valid
from llmgw.guard.gate import portable


@dataclass(frozen=True, slots=True)
class Finding:
    """One match: which check found it, its placeholder label, and where it is."""

    check: str
    label: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of thing to find, and how to find it cheaply.

    Python's `re` searches fast only for a pattern that starts with a literal; one that
    starts with a class or a lookbehind tries every position, dozens of times slower.
    So each detector says where its matches can be:

    - `literal`: the pattern starts with a literal, searched over the whole text;
      `word_start` keeps only matches not preceded by a letter or digit;
    - `around`: the text must hold `needle`; the pattern is searched within `back`
      characters before and `ahead` after each occurrence (an e-mail's `@`);
    - `digits`: the pattern is searched only within runs of digits (with spaces or
      dashes between) of at least `min_digits` digits, found in one pass for all.
    """

    label: str
    pattern: re.Pattern[str]
    how: str = "literal"
    needle: str = ""
    back: int = 0
    ahead: int = 0
    min_digits: int = 0
    word_start: bool = False
    valid: Callable[[str], bool] | None = None
    """A match is kept only if this accepts its text."""
    gate: str = ""
    """An RE2 pattern that matches wherever `pattern` can (`llmgw.guard.gate`): a text
    it does not match skips this detector. Empty: the detector always runs."""
    gate_ascii_only: bool = False
    """The gate holds for ASCII text only (an operator's pattern)."""


# Each gate below is its pattern's start, lookarounds dropped, bounds loosened to their
# minimum (or no maximum), `\d` as `\p{Nd}`: whatever the pattern matches begins with
# a match of its gate.


def _literal(label: str, pattern: str, gate: str, *, word_start: bool = True) -> Detector:
    return Detector(label, re.compile(pattern), word_start=word_start, gate=gate)


def _around(label: str, needle: str, pattern: str, back: int, ahead: int, gate: str) -> Detector:
    return Detector(label, re.compile(pattern), "around", needle, back, ahead, gate=gate)


def _digits(
    label: str,
    pattern: str,
    min_digits: int,
    gate: str,
    valid: Callable[[str], bool] | None = None,
) -> Detector:
    return Detector(label, re.compile(pattern), "digits", min_digits=min_digits, valid=valid, gate=gate)


def _card(text: str) -> bool:
    digits = only_digits(text)
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


PII: tuple[Detector, ...] = (
    # Local part and domain labels as RFC 5322's common subset; one '@', a dotted domain.
    # The local part is read backwards from each '@' (`_emails`), the domain here.
    Detector(
        "EMAIL",
        re.compile(r"@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}\b"),
        "email",
        "@",
        # A local part's last character, '@', the domain (`_emails`).
        gate=r"[A-Za-z0-9._%+-]@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2}",
    ),
    # 13 to 19 digits, single spaces or dashes between, the Luhn check decides.
    _digits("CARD", r"(?<![\d-])\d(?:[ -]?\d){12,18}(?!\d)", 13, r"\p{Nd}(?:[ -]?\p{Nd}){12}", _card),
    # Two letters, two check digits, up to 30 letters or digits in groups: mod 97 decides.
    # Found from its check digits' run, with the two letters before it.
    _digits(
        "IBAN",
        r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b",
        2,
        r"[A-Z]{2}\p{Nd}{2}(?: ?[A-Z0-9]){11}",
        iban_valid,
    ),
    _digits("SSN", r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])", 9, r"\p{Nd}{3}-\p{Nd}{2}-\p{Nd}{4}", ssn_valid),
    _digits("NATIONAL_ID", r"(?<!\d)[1-9]\d{10}(?!\d)", 11, r"[1-9]\p{Nd}{10}", tckn_valid),
    # International numbers (a leading +) and the North American (NNN) NNN-NNNN form;
    # bare digit runs are left alone: they are far more often not phone numbers.
    _literal(
        "PHONE",
        r"\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,5}(?!\d)",
        r"\+\p{Nd}{1,3}(?:[ .-]?\(?\p{Nd}{1,4}\)?){2}",
    ),
    _literal("PHONE", r"\(\d{3}\) ?\d{3}-\d{4}(?!\d)", r"\(\p{Nd}{3}\) ?\p{Nd}{3}-\p{Nd}{4}"),
)

SECRETS: tuple[Detector, ...] = (
    _literal(
        "PRIVATE_KEY",
        r"-----BEGIN (?:[A-Z0-9]{1,10} ){0,2}PRIVATE KEY-----"
        r"(?:[A-Za-z0-9+/=\s]{0,8192}-----END (?:[A-Z0-9]{1,10} ){0,2}PRIVATE KEY-----)?",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----",
        word_start=False,
    ),
    _literal("AWS_KEY", r"AKIA[0-9A-Z]{16}\b", r"AKIA[0-9A-Z]{16}"),
    _literal("AWS_KEY", r"ASIA[0-9A-Z]{16}\b", r"ASIA[0-9A-Z]{16}"),
    _literal("GITHUB_TOKEN", r"gh[pousr]_[A-Za-z0-9]{36,255}\b", r"gh[pousr]_[A-Za-z0-9]{36}"),
    _literal("GITHUB_TOKEN", r"github_pat_[A-Za-z0-9_]{22,255}\b", r"github_pat_[A-Za-z0-9_]{22}"),
    _literal("GITLAB_TOKEN", r"glpat-[A-Za-z0-9_-]{20,64}\b", r"glpat-[A-Za-z0-9_-]{20}"),
    _literal("SLACK_TOKEN", r"xox[abposr]-[A-Za-z0-9-]{10,250}\b", r"xox[abposr]-[A-Za-z0-9-]{10}"),
    _literal("GOOGLE_KEY", r"AIza[0-9A-Za-z_-]{35}\b", r"AIza[0-9A-Za-z_-]{35}"),
    _around(
        "STRIPE_KEY",
        "k_",
        r"(?<![A-Za-z0-9])[spr]k_(?:live|test)_[A-Za-z0-9]{16,99}\b",
        1,
        110,
        r"[spr]k_(?:live|test)_[A-Za-z0-9]{16}",
    ),
    # OpenAI (sk-, sk-proj-) and Anthropic (sk-ant-) keys.
    _literal("API_KEY", r"sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,200}", r"sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20}"),
    _literal("HF_TOKEN", r"hf_[A-Za-z0-9]{30,40}\b", r"hf_[A-Za-z0-9]{30}"),
    _literal(
        "JWT",
        r"eyJ[A-Za-z0-9_-]{8,2000}\.eyJ[A-Za-z0-9_-]{8,4000}\.[A-Za-z0-9_-]{0,1000}",
        r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.",
    ),
    _around(
        "BEARER_TOKEN",
        "earer ",
        r"(?<![A-Za-z0-9])[Bb]earer [A-Za-z0-9._~+/-]{16,1000}=*",
        1,
        1100,
        r"[Bb]earer [A-Za-z0-9._~+/-]{16}",
    ),
    # user:password@ in a URL: the credentials are what is replaced.
    _around(
        "URL_PASSWORD",
        "://",
        r"(?<=://)[^\s:/?#@]{1,128}:[^\s/?#@]{1,256}(?=@)",
        0,
        400,
        r"://[^:/?#@]+:[^/?#@]+@",
    ),
)


def regex_detectors(patterns: tuple[str, ...]) -> tuple[Detector, ...]:
    """An operator's patterns (validated when the settings loaded), one detector each.

    A pattern that opens with `\\b` and then a letter or digit is searched without the
    `\\b`, which the search then checks itself: `re` finds a leading literal fast and
    tries every position for a leading `\\b` (dozens of times slower)."""
    out = []
    for p in patterns:
        gate = p if portable(p) else ""
        if p.startswith("\\b") and len(p) > 2 and p[2].isalnum():
            out.append(
                Detector("REDACTED", re.compile(p[2:]), word_start=True, gate=gate, gate_ascii_only=True)
            )
        else:
            out.append(Detector("REDACTED", re.compile(p), gate=gate, gate_ascii_only=True))
    return tuple(out)


# A run of digits with single spaces or dashes between: where digit patterns can match.
_DIGIT_RUN = re.compile(r"[0-9](?:[ -]?[0-9])*")


# ASCII text's shape: every digit a 0, every capital an A. In it, digit runs and an
# IBAN's head are found by patterns that begin with a literal, which `re` searches fast.
_SHAPE = bytes.maketrans(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"0" * 10 + b"A" * 26)
_LONG_RUN = re.compile(rb"0(?:[ -]?0){8,}")
_IBAN_HEAD = b"AA00"


def _digit_runs(text: str) -> list[tuple[int, int, int]]:
    """(start, end, digits) of the runs of digits the digit patterns can match in: runs
    of nine digits or more (cards, SSNs, national ids), and an IBAN's two check digits
    after two capitals. ASCII text (most of it) is searched in its shape, one byte
    translation and two searches by a literal, dozens of times cheaper than a pattern
    that tries every position; other text by that pattern."""
    out: list[tuple[int, int, int]] = []
    if not text.isascii():
        for m in _DIGIT_RUN.finditer(text):
            run = m.group()
            out.append((m.start(), m.end(), len(run) - run.count(" ") - run.count("-")))
        return out
    shape = text.encode().translate(_SHAPE)
    for long_run in _LONG_RUN.finditer(shape):
        out.append((long_run.start(), long_run.end(), long_run.group().count(b"0")))
    at = shape.find(_IBAN_HEAD)
    while at >= 0:
        out.append((at + 2, at + 4, 2))
        at = shape.find(_IBAN_HEAD, at + 4)
    return out


_LOCAL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-")
_MAX_LOCAL = 64


def _emails(domain: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    """Each '@' with a local part before it (at most 64 characters, starting with a
    letter or digit) and a dotted domain after it. Linear: each '@' looks back at most
    64 characters and the domain is matched where it must start."""
    out: list[tuple[int, int]] = []
    at = text.find("@")
    while at >= 0:
        start = at
        floor = max(0, at - _MAX_LOCAL)
        while start > floor and text[start - 1] in _LOCAL_CHARS:
            start -= 1
        while start < at and not text[start].isalnum():
            start += 1
        end = at
        if start < at and (start == 0 or text[start - 1] not in _LOCAL_CHARS):
            m = domain.match(text, at)
            if m is not None:
                end = m.end()
                out.append((start, end))
        at = text.find("@", max(at + 1, end))
    return out


def _spans(det: Detector, text: str, runs: list[tuple[int, int, int]] | None) -> list[tuple[int, int]]:
    """Where `det` matches in `text`, before validation."""
    pattern = det.pattern
    if det.how == "literal":
        # One search first: most texts hold no match, and finditer costs more to start.
        first = pattern.search(text)
        if first is None:
            return []
        out = [first.span(), *(m.span() for m in pattern.finditer(text, first.end()))]
        if det.word_start:
            out = [(a, b) for a, b in out if a == 0 or not text[a - 1].isalnum()]
        return out
    if det.how == "email":
        return _emails(det.pattern, text)
    if det.how == "around":
        out = []
        at = text.find(det.needle)
        done = 0
        while at >= 0:
            lo = max(done, at - det.back)
            hi = min(len(text), at + len(det.needle) + det.ahead)
            for m in pattern.finditer(text, lo, hi):
                out.append(m.span())
                done = max(done, m.end())
            at = text.find(det.needle, max(at + 1, done))
        return out
    out = []
    for start, end, digits in runs or ():
        if digits < det.min_digits:
            continue
        # IBANs begin with their two letters: the window starts there.
        lo = start - 2 if det.label == "IBAN" else start
        if lo < 0 or (det.label == "IBAN" and not text[lo:start].isupper()):
            continue
        hi = len(text) if det.label == "IBAN" else end
        out.extend(m.span() for m in pattern.finditer(text, lo, min(hi, lo + 64)))
    return out


def find(check: str, detectors: tuple[Detector, ...], text: str) -> list[Finding]:
    """Every match of `detectors` in `text`, in order, overlaps dropped (the first to
    start, then the longest, wins). The request path passes only those its gate lets
    through (`llmgw.guard.gate`)."""
    found: list[Finding] = []
    runs: list[tuple[int, int, int]] | None = None
    for det in detectors:
        if det.how == "literal":
            pass
        elif det.how in ("around", "email"):
            if det.needle not in text:
                continue
        elif runs is None:
            runs = _digit_runs(text)
        valid = det.valid
        for a, b in _spans(det, text, runs):
            if valid is None or valid(text[a:b]):
                found.append(Finding(check, det.label, a, b))
    if len(found) > 1:
        found.sort(key=lambda f: (f.start, -f.end))
        kept = [found[0]]
        for f in found[1:]:
            if f.start >= kept[-1].end:
                kept.append(f)
        return kept
    return found

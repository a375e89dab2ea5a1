"""What the sim "generates": a deterministic token sequence, cut by stop strings.

The whole answer is planned when the request arrives, because it depends only on the
engine's seed, the request's seed and the prompt: the scheduler then only decides when
each token is released. Every generated token is one word piece of the sim's tokenizer
(a short word with its leading space, or a punctuation mark), so re-tokenizing the
answer gives the completion count back. A stop string ends generation at the token that
completes it, and the text up to (not including) the stop string is what is returned,
as OpenAI-compatible engines do.
"""

from __future__ import annotations

import random
import zlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

FinishReason = Literal["stop", "length"]

# Words of at most six letters, so each is exactly one token with its leading space.
_WORD_TEXT = (
    "the of and to in is it that was for on are with as his they be at one have this from or had by "
    "word but what some we can out other were all there when up use your how said an each she which "
    "do their time if will way about many then them write would like so these her long make thing "
    "see him two has look more day could go come did number sound no most people my over know water "
    "than call first who may down side been now find any new work part take get place made live "
    "where after back little only round man year came show every good me give our under name very "
    "just form great think say help low line differ turn cause much mean before move right "
    "boy old too same tell does set three want air well also play small end put home read hand port "
    "large spell add even land here must big high such follow act why ask men change went light kind "
    "off need house try us again animal point mother world near build self earth father head stand "
    "own page should found answer school grow study still learn plant cover food sun four "
    "state keep eye never last let cross farm hard start might story saw far sea draw left late run"
)
_WORDS: tuple[str, ...] = tuple(" " + w for w in _WORD_TEXT.split())
_PUNCTUATION: tuple[str, ...] = (".", ",")
_VOCAB: tuple[str, ...] = _WORDS + _PUNCTUATION
# The draw table: every word three times and a comma or full stop about one token in
# sixteen, so the text reads like text. Unweighted draws from a flat table are several
# times cheaper than weighted ones, and planning is on every request's path.
_DRAW: tuple[str, ...] = _WORDS * 3 + (".",) * (len(_WORDS) // 10) + (",",) * (len(_WORDS) // 10)


@dataclass(frozen=True, slots=True)
class OutputPlan:
    """The answer to one request: the text each token adds, and why generation ends.

    `deltas[i]` is the text released with token i; after a stop string it may be shorter
    than the token's piece, or empty. `len(deltas)` is the completion token count.
    """

    deltas: tuple[str, ...]
    finish_reason: FinishReason

    @property
    def text(self) -> str:
        """The whole answer."""
        return "".join(self.deltas)

    @property
    def tokens(self) -> int:
        """How many tokens the answer costs."""
        return len(self.deltas)


def request_seed(engine_seed: int, seed: int | None, prompt_ids: Sequence[int]) -> int:
    """The seed of one answer: the engine's, the request's, and the prompt's content."""
    digest = zlib.crc32(array("q", prompt_ids).tobytes())
    return zlib.crc32(f"{engine_seed}:{seed}".encode(), digest)


def plan_output(
    *,
    seed: int,
    max_tokens: int,
    finish_reason: FinishReason,
    stop: Sequence[str] = (),
) -> OutputPlan:
    """The answer of `max_tokens` tokens from `seed`, cut at the first stop string.

    `finish_reason` is what an answer that runs its full length ends with: "length" when
    the client set max_tokens, "stop" when the sim's default length stands in for the
    model's end-of-sequence token.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    pieces = random.Random(seed).choices(_DRAW, k=max_tokens)
    stops = [s for s in stop if s]
    if not stops:
        return OutputPlan(tuple(pieces), finish_reason)
    return _cut_at_stop(pieces, stops) or OutputPlan(tuple(pieces), finish_reason)


def _cut_at_stop(pieces: Sequence[str], stops: Sequence[str]) -> OutputPlan | None:
    longest = max(len(s) for s in stops)
    text = ""
    for i, piece in enumerate(pieces):
        before = len(text)
        text += piece
        window_start = max(0, before - longest + 1)
        hits = [pos for s in stops if (pos := text.find(s, window_start)) != -1]
        if not hits:
            continue
        cut = min(hits)
        deltas: list[str] = []
        offset = 0
        for piece_before in pieces[: i + 1]:
            start, end = offset, offset + len(piece_before)
            deltas.append(piece_before[: max(0, cut - start)] if end > cut else piece_before)
            offset = end
        return OutputPlan(tuple(deltas), "stop")
    return None

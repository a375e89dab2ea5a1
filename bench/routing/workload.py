"""The routing-quality workload: groups of users sharing long system prompts, multi-turn.

After llm-d's published prefix-cache benchmark (inference-perf `shared_prefix` data:
150 groups × 5 users, 6,000-token system prompts, 1,200-token questions, 8 vLLM pods
whose KV capacity the resident prefixes fill to 73 %), scaled to four sim replicas on a
small machine (see README.md for the scaling). Everything here is a pure function of
the `Shape` and the seed, so every target is sent the identical request sequence.

Each request is one turn of one user's conversation: the group's system prompt, the
conversation so far (the user's earlier turns and stand-in assistant answers), and a
new short question. After `turns_per_conversation` turns the user starts over, with the
same system prompt. Arrivals are open loop (Poisson at `rate` per second); each picks
a user uniformly at random. The assistant messages in the history are generated here,
not taken from the replies, so the sequence does not depend on what a target answered;
for the prefix cache that is the same thing, since the sim caches prompt blocks only.

Sizes are counted with the sim's own tokenizer (`llmgw.sim.tokenizer`), and the working
set with its block hashing (`llmgw.sim.prefix_cache.block_hashes`), so they are exact.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass
from typing import Any

from llmgw.sim.chat_template import render_chat
from llmgw.sim.prefix_cache import block_hashes
from llmgw.sim.tokenizer import Tokenizer

BLOCK_SIZE = 16
"""Tokens per KV block, the sims' `--block-size`."""
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
# Words of three to six letters: one sim token each, with their leading space.
_VOCABULARY_SIZE = 5000


@dataclass(frozen=True)
class Shape:
    """The sizes of the workload, in sim tokens."""

    groups: int = 16
    users_per_group: int = 5
    system_prompt_tokens: int = 1800
    question_tokens: int = 40
    answer_tokens: int = 40
    """Length of the stand-in assistant message each turn adds to the history."""
    turns_per_conversation: int = 4
    max_tokens: int = 32
    """Tokens each request asks the replica to generate."""
    seed: int = 1


@dataclass(frozen=True)
class Request:
    """One scheduled request."""

    index: int
    at_s: float
    """When to send it, in seconds from the start of the run."""
    phase: str
    """"warmup" (excluded from the figures) or "measure"."""
    group: int
    user: int
    conversation: int
    turn: int
    prompt_tokens: int
    body: bytes


@dataclass(frozen=True)
class Schedule:
    """The requests of one run, and what they add up to."""

    shape: Shape
    rate: float
    warmup_s: float
    measure_s: float
    requests: tuple[Request, ...]
    system_prompt_tokens: tuple[int, ...]
    """Exact token count of each group's system prompt message, template included."""
    working_set_blocks: int
    """Mean, over the measured arrivals, of the distinct cacheable blocks of every group's
    system prompt plus every user's latest prompt: what the replicas must hold for every
    request to find its prefix cached (with each prefix held once)."""

    def summary(self) -> dict[str, Any]:
        measured = [r for r in self.requests if r.phase == "measure"]
        return {
            "shape": asdict(self.shape),
            "rate_per_s": self.rate,
            "warmup_s": self.warmup_s,
            "measure_s": self.measure_s,
            "requests": len(self.requests),
            "measured_requests": len(measured),
            "system_prompt_tokens": list(self.system_prompt_tokens),
            "mean_prompt_tokens": round(sum(r.prompt_tokens for r in measured) / max(1, len(measured)), 1),
            "working_set_blocks": self.working_set_blocks,
        }


def _vocabulary(seed: int) -> list[str]:
    rng = random.Random(f"{seed}:vocabulary")
    words: set[str] = set()
    while len(words) < _VOCABULARY_SIZE:
        words.add("".join(rng.choice(_LETTERS) for _ in range(rng.randint(3, 6))))
    return sorted(words)


def _text(rng: random.Random, vocabulary: list[str], head: str, tokens: int, tokenizer: Tokenizer) -> str:
    """`head` followed by sentences of vocabulary words, cut to `tokens` sim tokens."""
    parts = [head]
    count = tokenizer.count(head)
    since_stop = 0
    while count < tokens:
        if since_stop >= 12 and count + 2 <= tokens:
            parts.append(".")
            since_stop = 0
            count += 1
            continue
        parts.append(" " + rng.choice(vocabulary))
        since_stop += 1
        count += 1
    return "".join(parts)


def build(shape: Shape, *, rate: float, warmup_s: float, measure_s: float, model: str) -> Schedule:
    """The seeded request sequence for one run (identical for every target)."""
    tokenizer = Tokenizer(32000)
    vocabulary = _vocabulary(shape.seed)
    systems = [
        _text(
            random.Random(f"{shape.seed}:system:{g}"),
            vocabulary,
            f"Customer {g:02d} service handbook.",
            shape.system_prompt_tokens,
            tokenizer,
        )
        for g in range(shape.groups)
    ]
    system_tokens = tuple(len(tokenizer.encode(render_chat([_msg("system", s)], False))) for s in systems)
    users = shape.groups * shape.users_per_group
    history: list[list[dict[str, str]]] = [[] for _ in range(users)]
    conversation = [0] * users
    turn = [1] * users
    latest_blocks = [0] * users  # cacheable blocks of each user's latest prompt past its system prompt
    system_blocks = [n // BLOCK_SIZE for n in system_tokens]
    rng = random.Random(f"{shape.seed}:arrivals")
    text_rng = random.Random(f"{shape.seed}:turns")
    requests: list[Request] = []
    working_sets: list[int] = []
    at = 0.0
    end = warmup_s + measure_s
    while len(requests) < 1_000_000:
        at += rng.expovariate(rate)
        if at >= end:
            break
        user = rng.randrange(users)
        group = user // shape.users_per_group
        question = _text(
            text_rng,
            vocabulary,
            f"User {user % shape.users_per_group} asks (conversation {conversation[user]}, "
            f"turn {turn[user]}):",
            shape.question_tokens,
            tokenizer,
        )
        messages = [_msg("system", systems[group]), *history[user], _msg("user", question)]
        prompt_ids = tokenizer.encode(render_chat(messages))
        latest_blocks[user] = len(block_hashes(prompt_ids, BLOCK_SIZE)) - system_blocks[group]
        phase = "warmup" if at < warmup_s else "measure"
        if phase == "measure":
            working_sets.append(sum(system_blocks) + sum(latest_blocks))
        body = {
            "model": model,
            "messages": messages,
            "max_tokens": shape.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        requests.append(
            Request(
                index=len(requests),
                at_s=at,
                phase=phase,
                group=group,
                user=user,
                conversation=conversation[user],
                turn=turn[user],
                prompt_tokens=len(prompt_ids),
                body=json.dumps(body, separators=(",", ":")).encode(),
            )
        )
        answer = _text(text_rng, vocabulary, "Answer:", shape.answer_tokens, tokenizer)
        history[user] += [_msg("user", question), _msg("assistant", answer)]
        turn[user] += 1
        if turn[user] > shape.turns_per_conversation:
            history[user], turn[user] = [], 1
            conversation[user] += 1
    working_set = math.ceil(sum(working_sets) / len(working_sets)) if working_sets else sum(system_blocks)
    return Schedule(
        shape=shape,
        rate=rate,
        warmup_s=warmup_s,
        measure_s=measure_s,
        requests=tuple(requests),
        system_prompt_tokens=system_tokens,
        working_set_blocks=working_set,
    )


def _msg(role: str, content: str) -> dict[str, str]:
    return {"role": role, "content": content}

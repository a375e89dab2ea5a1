"""GPU classes: how a kind of card is named, what is known about it, and which classes
a profile's `gpu:` need stands for.

A class is the card's model and its memory in gigabytes, lowercase and joined by
dashes: `h100-80g`, `a100-40g`, `l4-24g`, `v100-32g`, `rtx-a6000-48g`. The memory is in
the name because the same card ships with different amounts of it (A100 40 and 80 GB)
and a model that fits one does not fit the other.

A MIG instance is a class of its own, written as its card's class, `-mig-`, and
NVIDIA's own profile name: `h100-80g-mig-1g.10gb`, `a100-40g-mig-3g.20gb`,
`h100-80g-mig-1g.10gb+me`. Keeping NVIDIA's spelling means the class an operator reads
in `nvidia-smi mig -lgip` is the one they write in the catalog.

A need (`gpu: {min_memory_gb: 40, fp8: true}`) names no class: it stands for every
class in the cluster that meets it, so one catalog entry places sensibly on any site's
cards. A class missing from the table below still meets a need that asks only for
memory, read from its name; it cannot be shown to have fp8 or an architecture, so a
need asking for those passes it over rather than guessing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from llmgw.core.strict import Strict

_CLASS = re.compile(r"^(?P<card>[a-z0-9]+(?:-[a-z0-9]+)*?)-(?P<memory>\d+)g$")
_MIG = re.compile(r"^(?P<parent>.+-\d+g)-mig-(?P<slices>\d+)g\.(?P<memory>\d+)gb(?P<media>\+me)?$")

VENDORS: tuple[str, ...] = ("nvidia", "amd", "intel")


@dataclass(frozen=True)
class Card:
    """What is known about one whole-card class."""

    gpu_class: str
    vendor: str
    arch: str
    memory_gb: int
    fp8: bool


def _card(gpu_class: str, vendor: str, arch: str, fp8: bool = False) -> Card:
    memory = _CLASS.match(gpu_class)
    assert memory is not None, gpu_class
    return Card(gpu_class, vendor, arch, int(memory.group("memory")), fp8)


# fp8 means the card computes in it natively (Ada, Hopper, Blackwell, CDNA3); older
# cards run an fp8 checkpoint only by upcasting, slower than the bf16 one would be.
KNOWN_CARDS: tuple[Card, ...] = (
    _card("v100-16g", "nvidia", "volta"),
    _card("v100-32g", "nvidia", "volta"),
    _card("t4-16g", "nvidia", "turing"),
    _card("a10-24g", "nvidia", "ampere"),
    _card("a10g-24g", "nvidia", "ampere"),
    _card("a30-24g", "nvidia", "ampere"),
    _card("a40-48g", "nvidia", "ampere"),
    _card("rtx-a6000-48g", "nvidia", "ampere"),
    _card("a100-40g", "nvidia", "ampere"),
    _card("a100-80g", "nvidia", "ampere"),
    _card("l4-24g", "nvidia", "ada", fp8=True),
    _card("l40-48g", "nvidia", "ada", fp8=True),
    _card("l40s-48g", "nvidia", "ada", fp8=True),
    _card("rtx4090-24g", "nvidia", "ada", fp8=True),
    _card("rtx-6000-ada-48g", "nvidia", "ada", fp8=True),
    _card("h100-80g", "nvidia", "hopper", fp8=True),
    _card("h100-94g", "nvidia", "hopper", fp8=True),
    _card("h200-141g", "nvidia", "hopper", fp8=True),
    _card("gh200-96g", "nvidia", "hopper", fp8=True),
    _card("b200-180g", "nvidia", "blackwell", fp8=True),
    _card("mi210-64g", "amd", "cdna2"),
    _card("mi250x-128g", "amd", "cdna2"),
    _card("mi300x-192g", "amd", "cdna3", fp8=True),
    _card("mi325x-256g", "amd", "cdna3", fp8=True),
    _card("max1550-128g", "intel", "xe-hpc"),
)

ARCHES: tuple[str, ...] = tuple(dict.fromkeys(card.arch for card in KNOWN_CARDS))


@dataclass(frozen=True)
class MigInstance:
    """A MIG class read apart: its card's class, compute slices and memory."""

    parent: str
    slices: int
    memory_gb: int


def parse_mig(gpu_class: str) -> MigInstance | None:
    """`h100-80g-mig-1g.10gb` as its parts; None for anything that is not a MIG class."""
    m = _MIG.match(gpu_class)
    if m is None:
        return None
    return MigInstance(m.group("parent"), int(m.group("slices")), int(m.group("memory")))


def is_mig_class(gpu_class: str) -> bool:
    """Whether a class is a MIG instance rather than a whole card."""
    return parse_mig(gpu_class) is not None


def valid_class_name(gpu_class: str) -> bool:
    """Whether a class is written the way discovery names cards (see the module doc)."""
    mig = parse_mig(gpu_class)
    return _CLASS.match(mig.parent if mig else gpu_class) is not None


def card_of(gpu_class: str) -> Card | None:
    """What the table knows of a class; a MIG instance answers with its card's facts
    and its own memory."""
    mig = parse_mig(gpu_class)
    parent = mig.parent if mig else gpu_class
    for card in KNOWN_CARDS:
        if card.gpu_class == parent:
            if mig is None:
                return card
            return Card(gpu_class, card.vendor, card.arch, mig.memory_gb, card.fp8)
    return None


def memory_of(gpu_class: str) -> int:
    """The memory of one device of the class in GB, read from its name; 0 if unreadable."""
    mig = parse_mig(gpu_class)
    if mig is not None:
        return mig.memory_gb
    m = _CLASS.match(gpu_class)
    return int(m.group("memory")) if m else 0


class GPUNeed(Strict):
    """The card a profile needs, said instead of naming a class. Every field left out
    asks for nothing; `gpu: {}` is any whole card."""

    min_memory_gb: int = 0
    """Memory of each card, at least: the weights' share plus the KV cache per card."""
    fp8: bool = False
    """The card computes in fp8 natively: for an fp8 checkpoint."""
    vendor: str = ""
    """nvidia, amd or intel: what the engine build on the nodes supports."""
    arch: tuple[str, ...] = ()
    """Any of these architectures (ampere, ada, hopper, blackwell, cdna3, …)."""
    mig: bool = False
    """A MIG instance may stand in for a card. Off by default: an instance is a slice of
    someone else's card, and a need written for cards should not land on one unasked."""

    def problems(self) -> list[str]:
        """What is wrong with the need itself, as sentence tails naming field and fix."""
        out: list[str] = []
        if self.min_memory_gb < 0:
            out.append(
                f"gpu.min_memory_gb {self.min_memory_gb} is negative; give the GB each card needs, or 0"
            )
        if self.vendor and self.vendor not in VENDORS:
            out.append(f"gpu.vendor {json.dumps(self.vendor)} is not one of {', '.join(VENDORS)}")
        for arch in self.arch:
            if arch not in ARCHES:
                out.append(
                    f"gpu.arch {json.dumps(arch)} is not a known architecture; use one of {', '.join(ARCHES)}"
                )
        return out

    def met_by(self, gpu_class: str) -> bool:
        """Whether one device of this class meets the need."""
        if is_mig_class(gpu_class) and not self.mig:
            return False
        memory = memory_of(gpu_class)
        if memory == 0 or memory < self.min_memory_gb:
            return False
        if not (self.fp8 or self.vendor or self.arch):
            return True
        card = card_of(gpu_class)
        if card is None:
            return False
        return (
            (not self.fp8 or card.fp8)
            and (not self.vendor or card.vendor == self.vendor)
            and (not self.arch or card.arch in self.arch)
        )


def classes_meeting(need: GPUNeed, classes: Iterable[str]) -> list[str]:
    """The classes among `classes` that meet `need`, smallest memory first, so placement
    tries the card the model wastes least of before a bigger one."""
    found = {c for c in classes if need.met_by(c)}
    return sorted(found, key=lambda c: (memory_of(c), c))

"""Reading `nvidia-smi`: a node's NVIDIA cards, the class each is placed as, their memory
and power, and their MIG instances.

Two outputs are read, both as text so tests use recorded ones:

- `nvidia-smi --query-gpu=index,uuid,name,memory.total,power.limit,power.draw,mig.mode.current
  --format=csv,noheader,nounits`: one line a card, memory in MiB, power in watts, and
  `[N/A]` (or `[Not Supported]`) where a card has no such figure.
- `nvidia-smi -L`: each card, and under a card in MIG mode its instances with their
  profile names and UUIDs, which the query above does not list.

A card's class (see `llmgw.hardware.gpus`) is its model and memory: the driver's name
reduced to the model ("NVIDIA A100-SXM4-40GB" is an a100), matched against the known
cards, with the memory picking between sizes of one model. A card the table does not
know gets a class made the same way from its name and memory, so an operator can still
name it in the catalog.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmgw.hardware.gpus import KNOWN_CARDS
from llmgw.protocol.inventory import GPU, MigDevice

QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "uuid",
    "name",
    "memory.total",
    "power.limit",
    "power.draw",
    "mig.mode.current",
)
QUERY_ARGV: tuple[str, ...] = (
    "nvidia-smi",
    f"--query-gpu={','.join(QUERY_FIELDS)}",
    "--format=csv,noheader,nounits",
)
LIST_ARGV: tuple[str, ...] = ("nvidia-smi", "-L")


@dataclass(frozen=True)
class SmiCard:
    """One line of the query."""

    index: int
    uuid: str
    name: str
    memory_mib: int
    power_limit_watts: float | None
    power_draw_watts: float | None
    mig_enabled: bool


@dataclass(frozen=True)
class SmiMig:
    """One MIG instance line of `nvidia-smi -L`, with its card's index."""

    card_index: int
    profile: str
    device: int
    uuid: str


def _number(text: str) -> float | None:
    """A figure, or None for nvidia-smi's ways of saying there is none."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        return None


def parse_query(text: str) -> list[SmiCard]:
    """The cards in the query's output. Raises ValueError naming a line that is not one."""
    cards: list[SmiCard] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        # A name could hold a comma in principle; the fields around it cannot.
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < len(QUERY_FIELDS):
            raise ValueError(
                f"nvidia-smi line {line.strip()!r} does not have the {len(QUERY_FIELDS)} fields asked for"
            )
        extra = len(parts) - len(QUERY_FIELDS)
        index, uuid = parts[0], parts[1]
        name = ", ".join(parts[2 : 3 + extra])
        memory, limit, draw, mig = parts[3 + extra :]
        memory_mib = _number(memory)
        if not index.isdigit() or memory_mib is None:
            raise ValueError(f"nvidia-smi line {line.strip()!r} has no card index or memory")
        cards.append(
            SmiCard(
                index=int(index),
                uuid=uuid,
                name=name,
                memory_mib=int(memory_mib),
                power_limit_watts=_number(limit),
                power_draw_watts=_number(draw),
                mig_enabled=mig.lower() == "enabled",
            )
        )
    return cards


_CARD_LINE = re.compile(r"^GPU\s+(\d+):")
_MIG_LINE = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+(\d+):\s+\(UUID:\s*([^)\s]+)\s*\)")


def parse_list(text: str) -> list[SmiMig]:
    """The MIG instances in `nvidia-smi -L`'s output, each under the card listed above it."""
    out: list[SmiMig] = []
    card: int | None = None
    for line in text.splitlines():
        card_match = _CARD_LINE.match(line)
        if card_match:
            card = int(card_match.group(1))
            continue
        mig_match = _MIG_LINE.match(line)
        if mig_match and card is not None:
            out.append(SmiMig(card, mig_match.group(1).lower(), int(mig_match.group(2)), mig_match.group(3)))
    return out


# Words in a driver's card name that say nothing about which model it is: the vendor and
# brands, form factors and memory kinds. The memory size is read separately.
_NOISE = frozenset(
    {
        "nvidia",
        "tesla",
        "geforce",
        "quadro",
        "generation",
        "pcie",
        "sxm",
        "sxm2",
        "sxm3",
        "sxm4",
        "sxm5",
        "nvl",
        "hbm2",
        "hbm2e",
        "hbm3",
        "hbm3e",
        "gddr6",
        "gddr6x",
    }
)
_SIZE = re.compile(r"^(\d+)gb$")
_MIB_PER_GIB = 1024
# A card's nominal size sits a few percent above what the driver reports (an L4's 24 GB
# is 22.5 GiB usable); two sizes of one model are far further apart than this.
_MEMORY_TOLERANCE = 0.12


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]


def _model_words(name: str) -> list[str]:
    return [w for w in _words(name) if w not in _NOISE and not _SIZE.match(w)]


def _class_card(gpu_class: str) -> str:
    return gpu_class.rsplit("-", 1)[0]


def card_class(name: str, memory_mib: int) -> str:
    """The class a card is placed as, from the driver's name and its memory."""
    words = _model_words(name)
    key = "".join(words)
    reported_gib = memory_mib / _MIB_PER_GIB
    best: tuple[float, str] | None = None
    for card in KNOWN_CARDS:
        if card.vendor != "nvidia" or _class_card(card.gpu_class).replace("-", "") != key:
            continue
        miss = abs(card.memory_gb - reported_gib) / card.memory_gb
        if miss <= _MEMORY_TOLERANCE and (best is None or miss < best[0]):
            best = (miss, card.gpu_class)
    if best is not None:
        return best[1]
    # Not in the table: the name's own size if it states one ("H800 80GB"), else the
    # memory the driver reports, in whole GiB.
    sizes = [int(m.group(1)) for w in _words(name) if (m := _SIZE.match(w))]
    memory_gb = sizes[0] if sizes else max(round(reported_gib), 1)
    return f"{'-'.join(words) or 'gpu'}-{memory_gb}g"


def mig_class(parent_class: str, profile: str) -> str:
    """A MIG instance's class: its card's class, `-mig-`, and NVIDIA's profile name."""
    return f"{parent_class}-mig-{profile}"


def _mig_memory_gb(profile: str) -> int:
    match = re.search(r"\.(\d+)gb", profile)
    return int(match.group(1)) if match else 0


def gpus_from(query_text: str, list_text: str) -> tuple[GPU, ...]:
    """The node's cards from the two outputs; `list_text` may be empty when no card is in
    MIG mode (then nothing in it is needed)."""
    migs = parse_list(list_text)
    out: list[GPU] = []
    for card in parse_query(query_text):
        gpu_class = card_class(card.name, card.memory_mib)
        devices = tuple(
            MigDevice(
                uuid=m.uuid,
                profile=m.profile,
                gpu_class=mig_class(gpu_class, m.profile),
                memory_gb=_mig_memory_gb(m.profile),
                device=m.device,
            )
            for m in migs
            if m.card_index == card.index
        )
        out.append(
            GPU(
                index=card.index,
                uuid=card.uuid,
                name=card.name,
                gpu_class=gpu_class,
                memory_mib=card.memory_mib,
                power_limit_watts=card.power_limit_watts,
                power_draw_watts=card.power_draw_watts,
                mig_enabled=card.mig_enabled,
                mig_devices=devices if card.mig_enabled else (),
            )
        )
    return tuple(out)

"""Where a node is in the building, and the power domains a replica draws from.

A node's place comes from its labels `llmgw.io/site`, `room`, `row`, `rack` and `pdu`.
A level names one of those; a domain is one place at a level, written `level:name`
(`rack:r12-07`, `pdu:r12-07-a`, `row:12`), and is what a power cap applies to.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class Level(enum.StrEnum):
    """A level of the building, widest first."""

    SITE = "site"
    ROOM = "room"
    ROW = "row"
    RACK = "rack"
    PDU = "pdu"

    @property
    def label(self) -> str:
        """The node label that says where a node is at this level."""
        return f"llmgw.io/{self.value}"


LEVELS: tuple[Level, ...] = tuple(Level)

_DOMAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def parse_level(text: str) -> Level:
    """Reads `rack`, `Rack ` or `row`; raises ValueError naming the levels there are."""
    word = text.strip().lower()
    try:
        return Level(word)
    except ValueError:
        names = ", ".join(level.value for level in LEVELS)
        raise ValueError(f"{text!r} is not a facility level: use one of {names}") from None


@dataclass(frozen=True, order=True)
class Domain:
    """One place at one level: the thing a power cap is set on."""

    level: Level
    name: str

    def __str__(self) -> str:
        return f"{self.level.value}:{self.name}"


def parse_domain(text: str) -> Domain:
    """Reads `rack:r12-07`; raises ValueError saying how a domain is written."""
    level_text, sep, name = text.partition(":")
    if not sep or not name:
        raise ValueError(f"domain {text!r} is level:name, like rack:r12-07 or pdu:r12-07-a")
    level = parse_level(level_text)
    if not _DOMAIN_NAME.match(name):
        raise ValueError(
            f"domain {text!r}: the name {name!r} is letters, digits, '.', '_' and '-', "
            "as the node label gives it"
        )
    return Domain(level, name)


def domains_of(labels: dict[str, str]) -> list[Domain]:
    """The domains a node with these labels is in, widest first."""
    return [Domain(level, labels[level.label]) for level in LEVELS if labels.get(level.label)]

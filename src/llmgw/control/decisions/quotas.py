"""Owners' capacity quotas: how many devices (whole cards or MIG instances) the models
of one part of the tenancy tree may hold together, at every level that sets one.

A model's `owner` names the scope it counts against (`org:ID`, `team:ID`,
`project:ID`); that scope sits under others (a project under its team, a team under its
org), and a device a project's model holds counts against each of them. So a start is
allowed only where every scope on the owner's chain that has a quota has room for it.
A model with no owner is shared and counts against nobody.

Pure values, read from the store by `llmgw.control.runtime.quota_watch` and handed to `plan`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

MAX_DEPTH = 8
"""Longest chain followed: the tree has three levels, and a mapping written by hand
with a loop in it must not hang a pass."""


def chain(owner: str, parents: Mapping[str, str]) -> tuple[str, ...]:
    """`owner` and the scopes above it, nearest first (`project:p`, `team:t`, `org:o`);
    empty for a shared model."""
    if not owner:
        return ()
    out = [owner]
    while len(out) < MAX_DEPTH:
        above = parents.get(out[-1])
        if not above or above in out:
            break
        out.append(above)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Blocked:
    """The scope whose quota a start would exceed, with the figures that say so."""

    scope: str
    held: int
    quota: int
    cards: int

    def sentence(self, owner: str) -> str:
        """Why the start is refused, for `ctl explain`."""
        who = f"owner {owner}" if self.scope == owner else f"{self.scope}, above owner {owner},"
        return f"{who} holds {self.held} of its {self.quota} cards, and a replica takes {self.cards}"


@dataclass(frozen=True, slots=True)
class Quotas:
    """The quotas in force and the tree above the owners that have models.

    `limits` maps a scope (`team:research`) to the devices its models may hold together;
    a scope not in it has no quota. `parents` maps a scope to the one above it
    (`project:p` to `team:t`, `team:t` to `org:o`)."""

    limits: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    parents: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def blocked(self, owner: str, cards: int, held: Mapping[str, int]) -> Blocked | None:
        """The nearest scope on `owner`'s chain whose quota taking `cards` more would
        exceed, given what each scope's models hold now (`held`, counted over the whole
        subtree); None when every quota has room."""
        for scope in chain(owner, self.parents):
            quota = self.limits.get(scope)
            if quota is None:
                continue
            have = held.get(scope, 0)
            if have + cards > quota:
                return Blocked(scope, have, quota, cards)
        return None

    def allows(self, owner: str, cards: int, held: Mapping[str, int]) -> bool:
        return self.blocked(owner, cards, held) is None


NO_QUOTAS = Quotas()

"""Capacity classes: how much one model's capacity is worth against another's when
there is not enough for both.

critical outranks standard, which outranks opportunistic: a model of a higher class may
take capacity from one of a lower class. A model that names no class is standard, an
on-demand one opportunistic (it holds capacity only while asked for, and has always
been the first to give it up), and a guard model critical (every judged request waits
on it).
"""

from __future__ import annotations

CLASS_OPPORTUNISTIC = "opportunistic"
CLASS_STANDARD = "standard"
CLASS_CRITICAL = "critical"

CLASSES: tuple[str, ...] = (CLASS_OPPORTUNISTIC, CLASS_STANDARD, CLASS_CRITICAL)
"""Lowest first."""


def valid_class(name: str) -> bool:
    """Whether a model may declare this class; empty leaves it to `effective_class`."""
    return name == "" or name in CLASSES


def effective_class(declared: str, *, guard: bool, on_demand: bool) -> str:
    """The class a model is treated as, given what it declares and what kind it is."""
    if declared:
        return declared
    if guard:
        return CLASS_CRITICAL
    if on_demand:
        return CLASS_OPPORTUNISTIC
    return CLASS_STANDARD


def class_rank(name: str) -> int:
    """3 for critical, 2 for standard or none, 1 for anything else: a higher rank may
    take capacity from a lower one."""
    if name == CLASS_CRITICAL:
        return 3
    if name in (CLASS_STANDARD, ""):
        return 2
    return 1

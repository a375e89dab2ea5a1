"""How a settings rule that looks at more than one field reports what it finds.

A model validator that raises an ordinary exception can only say one thing. pydantic
does accept a `ValidationError` raised from inside a validator, though, and files each
of its line errors under the location of the model that raised it; so a rule can hand
back every problem it found, each at the path of the field it is about, and they reach
the operator together with every other problem in the document.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

Loc = tuple[str | int, ...]
"""A path inside the settings document: `("router", "admission", "bands", 0)`."""


@dataclass(frozen=True)
class Problem:
    """One refusal: where, relative to the model checking it, and what to do about it."""

    loc: Loc
    message: str
    value: Any = None


def refuse(title: str, problems: Iterable[Problem]) -> None:
    """Raises every problem at once, or returns when there are none."""
    details = [
        InitErrorDetails(
            type=PydanticCustomError("config_rule", "{problem}", {"problem": p.message}),
            loc=p.loc,
            input=p.value,
        )
        for p in problems
    ]
    if details:
        raise ValidationError.from_exception_data(title, details)

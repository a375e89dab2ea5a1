"""Package attributes imported on first use (PEP 562), for packages whose public
surface includes something heavy that most importers of the package never touch."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, sources: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports each name of `sources` from the
    module it maps to when the name is first read."""

    def attribute(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(source), name)

    return attribute

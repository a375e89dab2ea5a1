"""Keys, tenancy, limits, budgets and usage accounting for the client port.

The request path talks to `AuthGate` only; `AdminApi` serves `/api` on the admin
listener.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from llmgw.auth import admin_token
from llmgw.auth.tags import parse_tags

if TYPE_CHECKING:
    from llmgw.auth.admin_api import AdminApi
    from llmgw.auth.gate import AuthGate
    from llmgw.auth.principal import Principal

__all__ = ["AdminApi", "AuthGate", "Principal", "admin_token", "parse_tags"]

# The gate and the admin API bring in the store (SQLAlchemy, Alembic): imported when
# first asked for, so the command line's admin client, which needs neither, starts fast.
_LAZY = {
    "AdminApi": "llmgw.auth.admin_api",
    "AuthGate": "llmgw.auth.gate",
    "Principal": "llmgw.auth.principal",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

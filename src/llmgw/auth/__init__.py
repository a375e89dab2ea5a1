"""Keys, tenancy, limits, budgets and usage accounting for the client port.

The request path talks to `AuthGate` only; `AdminApi` serves `/api` on the admin
listener.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmgw.auth import admin_token
from llmgw.auth.tags import parse_tags
from llmgw.core.lazy import lazy_attributes

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

__getattr__ = lazy_attributes(__name__, _LAZY)

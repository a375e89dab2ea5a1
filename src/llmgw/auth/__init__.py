"""Keys, tenancy, limits, budgets and usage accounting for the client port.

The request path talks to `AuthGate` only; the admin API that manages what it reads
is `llmgw.admin`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmgw.auth.tags import parse_tags
from llmgw.core.lazy import lazy_attributes

if TYPE_CHECKING:
    from llmgw.auth.gate import AuthGate
    from llmgw.auth.principal import Principal

__all__ = ["AuthGate", "Principal", "parse_tags"]

# The gate brings in the store (SQLAlchemy, Alembic): imported when first asked for, so
# that importing `llmgw.auth` for a tag or a type stays cheap.
_LAZY = {
    "AuthGate": "llmgw.auth.gate",
    "Principal": "llmgw.auth.principal",
}

__getattr__ = lazy_attributes(__name__, _LAZY)

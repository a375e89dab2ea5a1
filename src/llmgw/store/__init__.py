"""The store of keys, tenancy, limits and usage: SQLite by default, PostgreSQL when
several gateways share it, one interface (`Store`) over both, and the migrations that
upgrade it in place."""

from llmgw.store.rows import SCOPE_KINDS, KeyRow, Membership, Scope, ScopeKind, UsageRow, UsageTotal
from llmgw.store.store import Store

__all__ = ["SCOPE_KINDS", "KeyRow", "Membership", "Scope", "ScopeKind", "Store", "UsageRow", "UsageTotal"]

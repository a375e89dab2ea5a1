"""The gateway's in-memory copy of keys and the tenancy tree, and the principals made
from them.

All active keys and every scope are loaded at start, then kept current by re-reading
what changed (rows carry `updated_at`) every half `cache_ttl`, and by a full reload now
and then, which also notices deletions. So a revoked key stops working within
`cache_ttl` on every gateway, and a request for a known key never touches the store.
Principals are built lazily per key and rebuilt when anything changed.
"""

from __future__ import annotations

from collections.abc import Iterable

from llmgw.auth import policy
from llmgw.auth.principal import Principal
from llmgw.config.auth import Auth
from llmgw.store.rows import SCOPE_KINDS, KeyRow, Scope, ScopeKind


class Directory:
    """Keys by hash, scopes by kind and id, and principals by key hash."""

    def __init__(self, auth: Auth) -> None:
        self._auth = auth
        self.scopes: dict[ScopeKind, dict[str, Scope]] = {kind: {} for kind in SCOPE_KINDS}
        self._keys: dict[str, KeyRow] = {}
        self._principals: dict[str, Principal | None] = {}
        self.by_header: dict[str, Principal] = {}
        """Principals by the `Authorization` header they were found with (`remember`):
        emptied, never replaced, whenever any principal may have changed, so a holder
        of the dictionary sees it emptied too."""

    def __len__(self) -> int:
        return len(self._keys)

    def replace(self, scopes: Iterable[Scope], keys: Iterable[KeyRow], now: float) -> None:
        """Everything at once, from a full load."""
        self.scopes = {kind: {} for kind in SCOPE_KINDS}
        self._keys = {}
        self.apply(scopes, keys, now)

    def apply(self, scopes: Iterable[Scope], keys: Iterable[KeyRow], now: float) -> bool:
        """Rows written since the last look; returns whether anything changed."""
        changed = False
        for scope in scopes:
            if self.scopes[scope.kind].get(scope.id) != scope:
                self.scopes[scope.kind][scope.id] = scope
                changed = True
        for key in keys:
            if key.active(now):
                if self._keys.get(key.hash) != key:
                    self._keys[key.hash] = key
                    changed = True
            elif self._keys.pop(key.hash, None) is not None:
                changed = True
        if changed:
            self._principals.clear()
            self.by_header.clear()
        return changed

    def remember(self, header: str, principal: Principal) -> None:
        """Keeps a principal found for an `Authorization` header, until anything changes."""
        self.by_header[header] = principal

    def forget_key(self, key_id: str) -> None:
        """Drops a key at once (revoked through this gateway's admin API)."""
        for key_hash, key in list(self._keys.items()):
            if key.id == key_id:
                del self._keys[key_hash]
                self._principals.pop(key_hash, None)
        for header in [h for h, principal in self.by_header.items() if principal.key_id == key_id]:
            del self.by_header[header]

    def usable_by(self, user_id: str, projects: frozenset[str], now: float) -> list[tuple[KeyRow, Principal]]:
        """The loaded, active keys a person may send with: their personal keys and the
        keys of the projects they belong to (the chat page's choices), with principals."""
        found: list[tuple[KeyRow, Principal]] = []
        for key_hash, key in list(self._keys.items()):
            mine = key.user_id == user_id if key.project_id is None else key.project_id in projects
            if not mine:
                continue
            principal = self.principal(key_hash, now)
            if principal is not None:
                found.append((key, principal))
        return sorted(found, key=lambda pair: (pair[0].project_id or "", pair[0].name, pair[0].id))

    def has(self, key_hash: str) -> bool:
        return key_hash in self._keys

    def principal(self, key_hash: str, now: float) -> Principal | None:
        """The principal of a loaded, active key; None for an unknown, expired or
        unusable one (a disabled person, a deleted project)."""
        key = self._keys.get(key_hash)
        if key is None:
            return None
        if not key.active(now):
            del self._keys[key_hash]
            self._principals.pop(key_hash, None)
            self.by_header.clear()
            return None
        if key_hash in self._principals:
            return self._principals[key_hash]
        made = policy.resolve(key, self.scopes, self._auth)
        self._principals[key_hash] = made
        return made

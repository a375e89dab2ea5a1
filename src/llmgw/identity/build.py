"""Building the sign-in routes from the settings: the session manager over the store,
and with an issuer the OIDC client holding the secret its reference names."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from llmgw.config.auth import Auth
from llmgw.config.secrets import resolve_secret
from llmgw.errors import StoreError
from llmgw.identity.app import IdentityApp
from llmgw.identity.oidc import OidcClient
from llmgw.identity.sessions import SessionManager
from llmgw.store import Store

log = logging.getLogger(__name__)

# Ended sessions are refused whether or not their rows are gone; purging only keeps the
# table small, so a sweep every ten minutes is plenty.
PURGE_INTERVAL_S = 600.0


def build_identity(
    auth: Auth,
    store: Store,
    *,
    config_dir: Path | None = None,
    clock: Callable[[], float] = time.time,
    vault: Mapping[str, str] | None = None,
) -> IdentityApp:
    """The /auth and /signup application; `ConfigError` when the client secret cannot be
    read (named by its setting). `vault` holds the values read from Vault at start."""
    sessions = SessionManager(store, auth.session, auth.effective_cache_ttl.total_seconds(), clock=clock)
    oidc = None
    if auth.oidc.enabled:
        secret = resolve_secret(
            auth.oidc.client_secret_file, "auth.oidc.client_secret_file", base_dir=config_dir, vault=vault
        )
        oidc = OidcClient(auth.oidc, secret)
    return IdentityApp(auth, store, sessions, oidc, clock=clock)


async def purge_loop(app: IdentityApp, interval_s: float = PURGE_INTERVAL_S) -> None:
    """Deletes ended sessions and abandoned sign-ins, for as long as the server runs."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await app.sessions.purge()
        except StoreError as exc:  # the store is back by the next sweep, or the next
            log.warning("sessions: purging ended sessions failed: %s", exc)

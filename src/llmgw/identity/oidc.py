"""The gateway as an OpenID Connect client (relying party) of `auth.oidc.issuer`.

authlib's OAuth 2.0 client builds the authorization URL (with the PKCE S256 challenge)
and redeems the code at the token endpoint; discovery and the provider's keys (JWKS)
are fetched through the same pooled client and kept, the keys fetched again once when
a token names a key id not yet seen (the provider rotated). The ID token is checked by
`id_token.verify_id_token`. Every failure to reach or understand the provider comes out
as a `SignInRefused` naming it, logged by the caller.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx2
from authlib.integrations.base_client import OAuthError
from authlib.integrations.httpx_client import AsyncOAuth2Client
from joserfc.jwk import KeySet

from llmgw.config.identity import OIDC
from llmgw.errors import SignInRefused
from llmgw.identity.id_token import verify_id_token
from llmgw.store.sessions import PendingLogin

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0
_DISCOVERY = "/.well-known/openid-configuration"


class OidcClient:
    """One provider, one pooled HTTP client, its discovery document and keys cached."""

    def __init__(self, settings: OIDC, client_secret: str, *, timeout_s: float = TIMEOUT_S) -> None:
        self._settings = settings
        self.issuer = settings.issuer.rstrip("/")
        self._http = AsyncOAuth2Client(
            client_id=settings.client_id,
            client_secret=client_secret,
            scope=" ".join(settings.scopes),
            code_challenge_method="S256",
            timeout=timeout_s,
        )
        self._metadata: dict[str, Any] | None = None
        self._keys: KeySet | None = None

    async def close(self) -> None:
        await self._http.aclose()

    async def metadata(self) -> dict[str, Any]:
        """The provider's discovery document, fetched once (again after a failure)."""
        if self._metadata is None:
            found = await self._get_json(self.issuer + _DISCOVERY, "discovery document")
            if str(found.get("issuer", "")).rstrip("/") != self.issuer:
                raise SignInRefused(
                    f"the identity provider says its issuer is {found.get('issuer')!r}, not {self.issuer}: "
                    "set auth.oidc.issuer to what the provider's discovery document says",
                    code="provider_misconfigured",
                )
            for field in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                if not isinstance(found.get(field), str):
                    raise SignInRefused(
                        f"the identity provider's discovery document has no {field}: check auth.oidc.issuer",
                        code="provider_misconfigured",
                    )
            methods = found.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
            if "client_secret_basic" not in methods and "client_secret_post" in methods:
                self._http.token_endpoint_auth_method = "client_secret_post"
            self._metadata = found
        return self._metadata

    async def authorization_url(self, redirect_uri: str, state: str, nonce: str, code_verifier: str) -> str:
        """Where to send the browser: the provider's authorization endpoint with this
        sign-in's state, nonce and PKCE challenge."""
        endpoint = (await self.metadata())["authorization_endpoint"]
        url, _ = self._http.create_authorization_url(
            endpoint, state=state, code_verifier=code_verifier, nonce=nonce, redirect_uri=redirect_uri
        )
        return str(url)

    async def finish(self, code: str, redirect_uri: str, login: PendingLogin, now: float) -> dict[str, Any]:
        """Redeems `code` and returns the checked ID token's claims."""
        metadata = await self.metadata()
        try:
            token = await self._http.fetch_token(
                metadata["token_endpoint"],
                grant_type="authorization_code",
                code=code,
                code_verifier=login.code_verifier,
                redirect_uri=redirect_uri,
            )
        except OAuthError as exc:
            raise SignInRefused(
                f"the identity provider refused the sign-in code ({exc.error}): sign in again",
                code="code_refused",
            ) from exc
        except (httpx2.HTTPError, ValueError) as exc:
            raise _unreachable("token endpoint", exc) from exc
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise SignInRefused(
                "the identity provider sent no ID token: make sure auth.oidc.scopes has openid",
                code="no_id_token",
            )
        keys = await self._key_set(refresh=False)
        expected = {
            "issuer": self.issuer,
            "client_id": self._settings.client_id,
            "nonce": login.nonce,
            "now": now,
        }
        try:
            return verify_id_token(id_token, keys, **expected)  # type: ignore[arg-type]
        except SignInRefused as refused:
            if refused.code != "bad_signature":
                raise
        # Perhaps signed with a key published since the keys were fetched: fetch once more.
        return verify_id_token(id_token, await self._key_set(refresh=True), **expected)  # type: ignore[arg-type]

    async def _key_set(self, *, refresh: bool) -> KeySet:
        if self._keys is None or refresh:
            document = await self._get_json((await self.metadata())["jwks_uri"], "keys (JWKS)")
            try:
                self._keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
            except (ValueError, KeyError, TypeError) as exc:
                raise SignInRefused(
                    "the identity provider's keys (JWKS) cannot be read: check the provider",
                    code="provider_misconfigured",
                ) from exc
        return self._keys

    async def _get_json(self, url: str, what: str) -> dict[str, Any]:
        try:
            answer = await self._http.request("GET", url, withhold_token=True)
            answer.raise_for_status()
            found = answer.json()
        except (httpx2.HTTPError, ValueError) as exc:
            raise _unreachable(what, exc) from exc
        if not isinstance(found, dict):
            raise _unreachable(what, ValueError("not a JSON object"))
        return found


def _unreachable(what: str, exc: Exception) -> SignInRefused:
    log.warning("OIDC: the identity provider's %s could not be read: %s", what, exc)
    return SignInRefused(
        f"the identity provider's {what} could not be read: try again shortly, or check auth.oidc.issuer",
        code="provider_unreachable",
    )

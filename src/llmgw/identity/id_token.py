"""Checking an OpenID Connect ID token: its signature against the provider's keys, and
the claims OIDC Core §3.1.3.7 requires a client to check.

joserfc (the JOSE library of authlib's author, which authlib's own `jose` module now
points to) does the signature and the registered claims; what is OIDC's own (`nonce`,
`azp` with several audiences) is checked here. A pure function: the keys, the expected
values and the time come in, the claims or a `SignInRefused` naming the check come out.
"""

from __future__ import annotations

from typing import Any

from joserfc import jwt
from joserfc.errors import (
    BadSignatureError,
    ClaimError,
    DecodeError,
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import KeySet

from llmgw.errors import SignInRefused

# Clocks of the provider and the gateway disagree by a little; a minute is what most
# clients (authlib's included) allow.
LEEWAY_S = 60
# Asymmetric algorithms only: with HS256 the "key" would be the client secret, and a
# token signed with it proves nothing about the provider.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")

_AGAIN = "sign in again"


def verify_id_token(
    token: str, keys: KeySet, *, issuer: str, client_id: str, nonce: str, now: float
) -> dict[str, Any]:
    """The claims of `token` once its signature verifies with one of `keys` and `iss`,
    `aud`, `exp`, `iat`, `sub` and `nonce` are what this sign-in expects at time `now`."""
    try:
        decoded = jwt.decode(token, keys, algorithms=list(ALGORITHMS))
    except BadSignatureError as exc:
        raise SignInRefused(
            f"the ID token's signature does not match the identity provider's keys: {_AGAIN}",
            code="bad_signature",
        ) from exc
    except (DecodeError, ValueError) as exc:
        raise SignInRefused(f"the ID token is not a signed JWT: {_AGAIN}", code="malformed_token") from exc
    except JoseError as exc:
        # An unknown key id, an algorithm not allowed: nothing the provider published signs it.
        raise SignInRefused(
            f"the ID token is not signed by a key of the identity provider ({exc.error}): {_AGAIN}",
            code="bad_signature",
        ) from exc
    claims = decoded.claims
    registry = jwt.JWTClaimsRegistry(
        now=int(now),
        leeway=LEEWAY_S,
        iss={"essential": True, "value": issuer},
        sub={"essential": True},
        aud={"essential": True, "value": client_id},
        exp={"essential": True},
        iat={"essential": True},
    )
    try:
        registry.validate(claims)
    except ExpiredTokenError as exc:
        raise SignInRefused(f"the ID token has expired: {_AGAIN}", code="expired_token") from exc
    except (InvalidClaimError, MissingClaimError) as exc:
        raise _claim_refusal(exc, issuer, client_id) from exc
    except ClaimError as exc:
        raise SignInRefused(
            f"the ID token's {exc.claim} claim is not acceptable: {_AGAIN}", code="bad_claims"
        ) from exc
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != client_id:
        raise SignInRefused(
            f"the ID token names several audiences but was not issued to {client_id!r} (azp): {_AGAIN}",
            code="wrong_audience",
        )
    if claims.get("nonce") != nonce:
        raise SignInRefused(
            f"the ID token's nonce is not the one this sign-in sent (a replayed token?): {_AGAIN}",
            code="wrong_nonce",
        )
    return claims


def _claim_refusal(exc: ClaimError, issuer: str, client_id: str) -> SignInRefused:
    if exc.claim == "aud":
        return SignInRefused(
            f"the ID token was issued to another client, not {client_id!r}: check auth.oidc.client_id",
            code="wrong_audience",
        )
    if exc.claim == "iss":
        return SignInRefused(
            f"the ID token was issued by someone other than {issuer}: check auth.oidc.issuer",
            code="wrong_issuer",
        )
    if exc.claim in ("iat", "nbf"):
        return SignInRefused(
            f"the ID token is not valid yet ({exc.claim}): check the clocks, then {_AGAIN}",
            code="early_token",
        )
    return SignInRefused(f"the ID token lacks or garbles its {exc.claim} claim: {_AGAIN}", code="bad_claims")

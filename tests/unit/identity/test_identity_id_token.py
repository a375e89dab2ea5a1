"""The ID token checks: a token the provider signed for this client and this sign-in
passes; each way a token can be wrong is refused with the code naming the check."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, OctKey, RSAKey

from llmgw.errors import SignInRefused
from llmgw.identity.id_token import verify_id_token

ISSUER = "https://idp.example.com"
CLIENT = "llmgw"
NONCE = "n-0123456789"
NOW = 1_800_000_000.0
PROVIDER = RSAKey.generate_key(2048, parameters={"kid": "provider"})
ATTACKER = RSAKey.generate_key(2048, parameters={"kid": "provider"})


def _keys() -> KeySet:
    return KeySet([PROVIDER])


def _claims(**changes: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "sub": "sub-1",
        "aud": CLIENT,
        "exp": int(NOW) + 300,
        "iat": int(NOW) - 5,
        "nonce": NONCE,
        "email": "ada@example.com",
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def _token(key: Any = PROVIDER, alg: str = "RS256", **changes: Any) -> str:
    return jwt.encode({"alg": alg, "kid": "provider"}, _claims(**changes), key)


def _verify(token: str) -> dict[str, Any]:
    return verify_id_token(token, _keys(), issuer=ISSUER, client_id=CLIENT, nonce=NONCE, now=NOW)


def _refusal(token: str) -> SignInRefused:
    with pytest.raises(SignInRefused) as refused:
        _verify(token)
    return refused.value


def test_a_token_of_the_provider_for_this_sign_in_passes() -> None:
    claims = _verify(_token())
    assert claims["sub"] == "sub-1"
    assert claims["email"] == "ada@example.com"


def test_a_token_signed_by_another_key_is_refused() -> None:
    refused = _refusal(_token(ATTACKER))
    assert refused.code == "bad_signature"
    assert "signature" in refused.message


def test_a_token_whose_claims_were_changed_after_signing_is_refused() -> None:
    header, _payload, signature = _token().split(".")
    forged = base64.urlsafe_b64encode(b'{"iss":"' + ISSUER.encode() + b'","sub":"admin"}').rstrip(b"=")
    assert _refusal(f"{header}.{forged.decode()}.{signature}").code == "bad_signature"


def test_a_token_signed_with_a_shared_secret_is_refused() -> None:
    # HS256 with a key anyone holding the client secret could make: never accepted.
    secret = OctKey.import_key(b"0123456789abcdef0123456789abcdef")
    assert _refusal(_token(secret, alg="HS256")).code == "bad_signature"


@pytest.mark.parametrize(
    ("changes", "code", "words"),
    [
        ({"aud": "someone-else"}, "wrong_audience", "client_id"),
        ({"aud": ["someone-else", CLIENT]}, "wrong_audience", "azp"),
        ({"iss": "https://evil.example.com"}, "wrong_issuer", "issuer"),
        ({"exp": int(NOW) - 120}, "expired_token", "expired"),
        ({"nonce": "another"}, "wrong_nonce", "nonce"),
        ({"nonce": None}, "wrong_nonce", "nonce"),
        ({"sub": None}, "bad_claims", "sub"),
        ({"iat": int(NOW) + 3600}, "early_token", "iat"),
    ],
)
def test_each_wrong_claim_is_refused_by_name(changes: dict[str, Any], code: str, words: str) -> None:
    refused = _refusal(_token(**changes))
    assert refused.code == code
    assert words in refused.message


def test_several_audiences_pass_when_issued_to_this_client() -> None:
    assert _verify(_token(aud=["other", CLIENT], azp=CLIENT))["azp"] == CLIENT


def test_garbage_is_refused_as_not_a_token() -> None:
    assert _refusal("not.a.token").code in ("malformed_token", "bad_signature")
    assert _refusal("nonsense").code == "malformed_token"

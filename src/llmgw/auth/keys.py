"""API key material: making a key, the hash it is stored and looked up by, and reading
it from an `Authorization: Bearer` header.

A key reads `llmgw-<id>-<secret>`: the id is the short public prefix people and logs
name it by (`llmgw keys revoke 3f9a0c1d`), the secret 256 random bits. Only the
SHA-256 of the whole key is stored. A slow password hash protects secrets people
choose; a 256-bit random secret cannot be guessed from its hash anyway, and a fast
hash keeps a cache miss cheap.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

KEY_PREFIX = "llmgw-"
ID_BYTES = 4
SECRET_BYTES = 32
_MAX_KEY_CHARS = 128
_ID_CHARS = ID_BYTES * 2


@dataclass(frozen=True, slots=True)
class NewKey:
    """A key just made: `plaintext` is shown once and never stored."""

    plaintext: str
    id: str
    hash: str


def hash_key(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def new_key() -> NewKey:
    key_id = secrets.token_hex(ID_BYTES)
    plaintext = f"{KEY_PREFIX}{key_id}-{secrets.token_urlsafe(SECRET_BYTES)}"
    return NewKey(plaintext, key_id, hash_key(plaintext))


def key_id_of(plaintext: str) -> str | None:
    """The public id inside a key of ours; None when it is not shaped like one, so a
    stray token costs no lookup."""
    if not plaintext.startswith(KEY_PREFIX) or len(plaintext) > _MAX_KEY_CHARS:
        return None
    key_id, sep, secret = plaintext[len(KEY_PREFIX) :].partition("-")
    if not sep or len(key_id) != _ID_CHARS or not secret:
        return None
    return key_id


def bearer_token(header: str | None) -> str | None:
    """The credential of an `Authorization: Bearer …` header, or None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    return token or None

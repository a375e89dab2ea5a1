"""Sealing the secrets the store keeps, under `secrets.master_key`.

A sealed value is one line of text, a versioned envelope:

    sealed:v1:<key id>:<base64 of nonce and AES-256-GCM ciphertext>   (a local key)
    sealed:v1:transit/<key>:<Vault's vault:vN:... ciphertext>        (vault-transit:KEY)

The key id (a digest of the key, or the transit key's name) says which key sealed a
value, so a rotation can tell what is done, and a wrong key is named as such instead of
yielding garbage. The associated data is the row's place (`cluster_secrets/engine`): a
sealed value copied into another row does not open. Transit has no associated data for
ordinary keys, so there the place is sealed inside the plaintext and checked on opening.

Anything without the `sealed:` prefix is a value written before sealing was configured;
`open_value` hands it back marked stale, and the store seals it in place.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from llmgw.errors import ConfigError
from llmgw.secrets.vault import VaultError

PREFIX = "sealed:"
VERSION = "v1"
NONCE_BYTES = 12
KEY_HEX_DIGITS = 64
_SETTING = "secrets.master_key"


def is_sealed(stored: str) -> bool:
    """Whether a stored value is an envelope rather than a plaintext from before sealing."""
    return stored.startswith(PREFIX)


def key_id(key: bytes) -> str:
    """A short, non-secret name for a local key: the same key always has the same id."""
    return hashlib.sha256(b"llmgw master key id\0" + key).hexdigest()[:12]


def envelope_key_id(stored: str) -> str:
    """The key id an envelope names ("" for a plaintext)."""
    if not is_sealed(stored):
        return ""
    parts = stored.split(":", 3)
    return parts[2] if len(parts) == 4 else ""


def parse_key(text: str) -> bytes:
    """A master key given as 64 hex digits; ConfigError naming the setting otherwise
    (the message never repeats the text, which is the secret)."""
    text = text.strip()
    if len(text) != KEY_HEX_DIGITS or any(c not in "0123456789abcdefABCDEF" for c in text):
        raise ConfigError(
            [
                f"{_SETTING}: the key it names is not {KEY_HEX_DIGITS} hex digits (it has {len(text)} "
                "characters): make one with `openssl rand -hex 32`"
            ]
        )
    return bytes.fromhex(text)


class Sealer(Protocol):
    """Seals and opens values bound to their place in the store."""

    @property
    def key_id(self) -> str: ...

    async def seal(self, plaintext: str, place: str) -> str: ...

    async def open(self, stored: str, place: str) -> str: ...


class Transit(Protocol):
    """The two transit calls a `TransitSealer` makes (`VaultClient` has them)."""

    async def encrypt(self, key: str, plaintext: bytes) -> str: ...

    async def decrypt(self, key: str, ciphertext: str) -> bytes: ...


def _wrong_key(place: str, sealed_by: str, have: str) -> ConfigError:
    return ConfigError(
        [
            f"{_SETTING}: the store's secret {place} was sealed by key {sealed_by}, but the configured "
            f"key is {have}: give the key that sealed the store (a store copied without its key "
            "cannot be opened)"
        ]
    )


def _unopenable(place: str) -> ConfigError:
    return ConfigError(
        [
            f"{_SETTING}: the store's secret {place} does not open with the configured key "
            "(wrong key, or the value was altered or moved): give the key that sealed the store"
        ]
    )


def _envelope(kid: str, body: str) -> str:
    return f"{PREFIX}{VERSION}:{kid}:{body}"


def _body(stored: str, place: str) -> str:
    parts = stored.split(":", 3)
    if len(parts) != 4 or parts[1] != VERSION:
        raise ConfigError([f"{_SETTING}: the store's secret {place} is sealed in an unknown format"])
    return parts[3]


@dataclass(frozen=True)
class KeySealer:
    """AES-256-GCM under a local 32-byte key."""

    key: bytes

    @property
    def key_id(self) -> str:
        return key_id(self.key)

    async def seal(self, plaintext: str, place: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = AESGCM(self.key).encrypt(nonce, plaintext.encode(), place.encode())
        return _envelope(self.key_id, base64.b64encode(nonce + sealed).decode())

    async def open(self, stored: str, place: str) -> str:
        kid = envelope_key_id(stored)
        if kid != self.key_id:
            raise _wrong_key(place, kid, self.key_id)
        try:
            raw = base64.b64decode(_body(stored, place), validate=True)
            return AESGCM(self.key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], place.encode()).decode()
        except (InvalidTag, ValueError):
            raise _unopenable(place) from None


@dataclass(frozen=True)
class TransitSealer:
    """Encryption done by Vault's transit engine: the key never leaves Vault."""

    vault: Transit
    key: str

    @property
    def key_id(self) -> str:
        return f"transit/{self.key}"

    async def seal(self, plaintext: str, place: str) -> str:
        bound = json.dumps({"place": place, "value": plaintext}).encode()
        return _envelope(self.key_id, await self.vault.encrypt(self.key, bound))

    async def open(self, stored: str, place: str) -> str:
        kid = envelope_key_id(stored)
        if kid != self.key_id:
            raise _wrong_key(place, kid, self.key_id)
        try:
            bound = json.loads(await self.vault.decrypt(self.key, _body(stored, place)))
        except (VaultError, ValueError):
            raise _unopenable(place) from None
        if not isinstance(bound, dict) or bound.get("place") != place:
            raise _unopenable(place)
        return str(bound["value"])


async def open_value(sealer: Sealer, stored: str, place: str) -> tuple[str, bool]:
    """The plaintext of a stored value and whether it should be sealed again now: a
    plaintext from before sealing is handed back as is, marked stale."""
    if not is_sealed(stored):
        return stored, True
    return await sealer.open(stored, place), False

"""A small client for the parts of Vault's HTTP API llmgw uses: token or AppRole login,
token renewal, KV version 2 reads and transit encrypt/decrypt.

Vault's errors are `{"errors": [...]}`; they are turned into `VaultError` carrying the
path and status only, because an error text could echo what was sent (a secret id, a
plaintext) and errors end up in logs.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from llmgw.config.secrets import Vault, resolve_secret
from llmgw.errors import ConfigError, LlmgwError

log = logging.getLogger(__name__)

# Renew when this fraction of the lease is spent: early enough that one failed attempt
# can be retried well before the token expires.
RENEW_AT_FRACTION = 0.5
MIN_RENEW_WAIT_S = 5.0
REQUEST_TIMEOUT_S = 10.0


class VaultError(LlmgwError):
    """Vault refused or could not be reached; the message names the path, never a value."""


@dataclass(frozen=True)
class Lease:
    """A token's lease: seconds it lives from when it was granted, and whether it renews."""

    ttl_s: float
    renewable: bool


def renew_wait(lease: Lease, fraction: float = RENEW_AT_FRACTION) -> float | None:
    """Seconds to wait before renewing a token with this lease; None for a token that
    never expires (ttl 0, a root token) or cannot be renewed."""
    if lease.ttl_s <= 0 or not lease.renewable:
        return None
    return max(lease.ttl_s * fraction, min(MIN_RENEW_WAIT_S, lease.ttl_s / 2))


def split_kv(reference_path: str) -> tuple[str, str, str]:
    """`mount/path/to#field` as (mount, path, field)."""
    location, _, field = reference_path.partition("#")
    mount, _, path = location.partition("/")
    return mount, path, field


def _tls(ca_file: str, base_dir: Path | None) -> ssl.SSLContext | bool:
    """The authorities Vault's certificate is checked against: the system's, or
    `ca_file` (relative to the configuration's folder); ConfigError naming the setting
    when it cannot be loaded."""
    if not ca_file:
        return True
    path = Path(ca_file).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        context = ssl.create_default_context(cafile=str(path))
    except ssl.SSLError as exc:  # before OSError, which it is
        reason = str(exc.reason or "not a PEM certificate")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    else:
        return context
    raise ConfigError(
        [f"secrets.vault.ca_file: cannot load {path} ({reason}): give Vault's CA certificate in PEM"]
    )


class VaultClient:
    """One authenticated session with Vault. `login()` before anything else."""

    def __init__(
        self,
        settings: Vault,
        *,
        base_dir: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self._base_dir = base_dir
        self._environ = environ
        self._token = ""
        self.lease = Lease(0.0, False)
        self._ssl = _tls(settings.ca_file, base_dir)
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                base_url=self.settings.address.rstrip("/") + "/",
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        headers = {}
        if self._token:
            headers["X-Vault-Token"] = self._token
        if self.settings.namespace:
            headers["X-Vault-Namespace"] = self.settings.namespace
        try:
            async with self._http().request(
                method, "v1/" + path, json=body, headers=headers, ssl=self._ssl
            ) as response:
                if response.status >= 400:
                    raise VaultError(f"Vault answered {response.status} to {method} /v1/{path}")
                if response.status == 204:
                    return {}
                data = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise VaultError(
                f"Vault at {self.settings.address} could not be reached for /v1/{path} ({type(exc).__name__})"
            ) from None
        return data if isinstance(data, dict) else {}

    def _credential(self, reference: str, setting: str) -> str:
        return resolve_secret(reference, setting, environ=self._environ, base_dir=self._base_dir)

    async def login(self) -> None:
        """Takes the token from `token_file`, or logs in with AppRole; then learns the
        token's lease (for renewal). ConfigError naming the setting when a credential
        cannot be read; VaultError when Vault refuses it."""
        s = self.settings
        if s.token_file:
            self._token = self._credential(s.token_file, "secrets.vault.token_file")
            data = (await self._call("GET", "auth/token/lookup-self")).get("data") or {}
            self.lease = Lease(float(data.get("ttl") or 0), bool(data.get("renewable")))
            return
        secret_id = self._credential(s.secret_id_file, "secrets.vault.secret_id_file")
        self._token = ""  # Vault refuses a login that carries an expired token
        answer = await self._call(
            "POST", f"auth/{s.approle_mount}/login", {"role_id": s.role_id, "secret_id": secret_id}
        )
        auth = answer.get("auth") or {}
        if not auth.get("client_token"):
            raise VaultError(f"Vault's AppRole login at auth/{s.approle_mount}/login gave no token")
        self._token = str(auth["client_token"])
        self.lease = Lease(float(auth.get("lease_duration") or 0), bool(auth.get("renewable")))

    async def renew(self) -> None:
        """Renews the token (renew-self); an AppRole session whose token cannot be renewed
        logs in again."""
        try:
            answer = await self._call("POST", "auth/token/renew-self", {})
        except VaultError:
            if not self.settings.role_id:
                raise
            await self.login()
            return
        auth = answer.get("auth") or {}
        self.lease = Lease(float(auth.get("lease_duration") or 0), bool(auth.get("renewable")))

    async def renew_loop(self, sleep: Callable[[float], Any] = asyncio.sleep) -> None:
        """Renews the token at a fraction of each lease, for as long as the server runs;
        a failed renewal is retried at the next (shorter) wait."""
        while (wait := renew_wait(self.lease)) is not None:
            await sleep(wait)
            try:
                await self.renew()
                log.info("vault: token renewed for %.0f s", self.lease.ttl_s)
            except VaultError as exc:
                log.warning("vault: renewing the token failed: %s", exc)
                self.lease = Lease(self.lease.ttl_s / 2, True)
                if self.lease.ttl_s < 1:
                    return

    async def read_kv(self, reference_path: str) -> str:
        """The field of a KV version 2 secret, `mount/path#field`."""
        mount, path, field = split_kv(reference_path)
        answer = await self._call("GET", f"{mount}/data/{path}")
        fields = (answer.get("data") or {}).get("data") or {}
        value = fields.get(field)
        if value is None or value == "":
            raise VaultError(f"Vault's secret {mount}/{path} has no field {field!r}")
        return str(value).strip()

    async def encrypt(self, key: str, plaintext: bytes) -> str:
        """Transit encryption: Vault's `vault:vN:...` ciphertext."""
        answer = await self._call(
            "POST",
            f"{self.settings.transit_mount}/encrypt/{key}",
            {"plaintext": base64.b64encode(plaintext).decode()},
        )
        ciphertext = (answer.get("data") or {}).get("ciphertext")
        if not ciphertext:
            raise VaultError(f"Vault's transit encrypt/{key} gave no ciphertext")
        return str(ciphertext)

    async def decrypt(self, key: str, ciphertext: str) -> bytes:
        answer = await self._call(
            "POST", f"{self.settings.transit_mount}/decrypt/{key}", {"ciphertext": ciphertext}
        )
        plaintext = (answer.get("data") or {}).get("plaintext")
        if plaintext is None:
            raise VaultError(f"Vault's transit decrypt/{key} gave no plaintext")
        return base64.b64decode(plaintext)

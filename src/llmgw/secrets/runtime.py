"""Every secret a configuration names, had when the server starts.

`open_secrets` logs in to Vault (when `secrets.vault` is set), reads every `vault:`
reference of the settings, then resolves every reference once through the one resolver
(`llmgw.config.secrets.resolve_secret`), so a secret that cannot be had stops the start
with one sentence naming its setting and reference, not a request an hour later. It
also builds the sealer for `secrets.master_key`. While the server runs, the Vault
token is renewed in the background (`VaultClient.renew_loop`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import AfterValidator, BaseModel

from llmgw.config.secrets import TRANSIT_PREFIX, VAULT_PREFIX, check_secret_reference, resolve_secret
from llmgw.config.server import Settings
from llmgw.errors import ConfigError
from llmgw.secrets.seal import KeySealer, Sealer, TransitSealer, parse_key
from llmgw.secrets.vault import VaultClient, VaultError

MASTER_KEY = "secrets.master_key"


def _is_reference(metadata: list[Any]) -> bool:
    return any(isinstance(m, AfterValidator) and m.func is check_secret_reference for m in metadata)


def references(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(setting, reference) for every non-empty `SecretReference` field in the settings,
    lists and mappings included (`notify.webhooks[0].secret_file`)."""
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        path = f"{prefix}{name}"
        if _is_reference(info.metadata) and isinstance(value, str):
            if value:
                yield path, value
        else:
            yield from _walk(value, path)


def _walk(value: object, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, BaseModel):
        yield from references(value, path + ".")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(item, f"{path}[{key}]")


def external_references(settings: Settings) -> Iterator[tuple[str, str]]:
    """The provider keys of the catalog's external models (the catalog sits below the
    settings' secret type, so its fields are plain strings named here)."""
    for model in settings.catalog().models():
        external = model.external
        if external is None:
            continue
        if external.api_key_file:
            yield f"models[{model.name}].external.api_key_file", external.api_key_file
        for i, key in enumerate(external.api_key_files):
            if key.file:
                yield f"models[{model.name}].external.api_key_files[{i}].file", key.file


@dataclass
class SecretsRuntime:
    """The secrets of a running server: values read from Vault (keyed by reference,
    for `resolve_secret(..., vault=...)`), the sealer (None without a master key), and
    the Vault session and its renewal task."""

    vault_values: Mapping[str, str] = field(default_factory=dict)
    sealer: Sealer | None = None
    client: VaultClient | None = None
    renewal: asyncio.Task[None] | None = None

    def resolve(self, reference: str, setting: str, base_dir: Path | None) -> str:
        return resolve_secret(reference, setting, base_dir=base_dir, vault=self.vault_values)

    async def close(self) -> None:
        if self.renewal is not None:
            self.renewal.cancel()
            await asyncio.gather(self.renewal, return_exceptions=True)
        if self.client is not None:
            await self.client.close()


async def _vault_values(client: VaultClient, refs: list[tuple[str, str]]) -> dict[str, str]:
    values: dict[str, str] = {}
    for setting, reference in refs:
        if not reference.startswith(VAULT_PREFIX) or reference in values:
            continue
        try:
            values[reference] = await client.read_kv(reference.removeprefix(VAULT_PREFIX))
        except VaultError as exc:
            raise ConfigError([f"{setting}: {reference!r} could not be read from Vault ({exc})"]) from None
    return values


async def open_secrets(
    settings: Settings,
    config_dir: Path | None,
    *,
    environ: Mapping[str, str] | None = None,
    renew: bool = True,
) -> SecretsRuntime:
    """Reads and checks every secret the settings name; ConfigError (one sentence per
    secret, naming setting and reference) when one cannot be had."""
    refs = [*references(settings), *external_references(settings)]
    vault = settings.secrets.vault
    runtime = SecretsRuntime()
    if vault.enabled:
        runtime.client = VaultClient(vault, base_dir=config_dir, environ=environ)
        try:
            try:
                await runtime.client.login()
            except VaultError as exc:
                how = "secrets.vault.token_file" if vault.token_file else "secrets.vault.secret_id_file"
                raise ConfigError([f"{how}: Vault at {vault.address} refused the login ({exc})"]) from None
            runtime.vault_values = await _vault_values(runtime.client, refs)
        except BaseException:
            await runtime.close()
            raise
    problems: list[str] = []
    master = ""
    for setting, reference in refs:
        if reference.startswith(TRANSIT_PREFIX):
            continue
        try:
            value = resolve_secret(
                reference, setting, base_dir=config_dir, environ=environ, vault=runtime.vault_values
            )
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        if setting == MASTER_KEY:
            master = value
    if problems:
        await runtime.close()
        raise ConfigError(problems)
    runtime.sealer = _sealer(settings.secrets.master_key, master, runtime.client)
    if runtime.client is not None and renew:
        runtime.renewal = asyncio.create_task(runtime.client.renew_loop(), name="vault-renew")
    return runtime


def _sealer(reference: str, value: str, client: VaultClient | None) -> Sealer | None:
    if not reference:
        return None
    if reference.startswith(TRANSIT_PREFIX):
        assert client is not None  # the settings refuse transit without secrets.vault
        return TransitSealer(client, reference.removeprefix(TRANSIT_PREFIX))
    return KeySealer(parse_key(value))


async def sealer_for(
    reference: str, settings: Settings, config_dir: Path | None, runtime: SecretsRuntime
) -> Sealer:
    """The sealer a key reference other than the configured one names (rotation's new
    key), read through the same resolver and the same Vault session."""
    if reference.startswith(TRANSIT_PREFIX):
        if runtime.client is None:
            raise ConfigError(
                [f"--new-key {reference!r} seals with Vault, but secrets.vault.address is empty"]
            )
        return TransitSealer(runtime.client, reference.removeprefix(TRANSIT_PREFIX))
    check_secret_reference(reference)
    values = dict(runtime.vault_values)
    if reference.startswith(VAULT_PREFIX) and runtime.client is not None:
        values.update(await _vault_values(runtime.client, [("--new-key", reference)]))
    return KeySealer(parse_key(resolve_secret(reference, "--new-key", base_dir=config_dir, vault=values)))

"""Secret lookup (files, environment, Vault) and encryption of secrets held in the store.

A setting that names a secret (`client_secret_file`, `token_file`, `secret_file`,
`secrets.master_key`) holds a *reference*, never the secret: a file path, or
`env:VARIABLE`, or `vault:mount/path#field` read from HashiCorp Vault (or OpenBao)
through `secrets.vault`. The configuration file can then be shared, reviewed and
committed without handing out what it protects.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.config.values import OptionalHttpURL
from llmgw.core.strict import Strict
from llmgw.errors import ConfigError

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VAULT_PATH = re.compile(r"^[^#\s]+/[^#\s]+#[^#\s]+$")

ENV_PREFIX = "env:"
FILE_PREFIX = "file:"
VAULT_PREFIX = "vault:"
TRANSIT_PREFIX = "vault-transit:"


def check_secret_reference(text: str) -> str:
    """Refuses a malformed `env:` or `vault:` reference; anything else is a file path."""
    if text.startswith(ENV_PREFIX):
        name = text.removeprefix(ENV_PREFIX)
        if not _ENV_NAME.match(name):
            raise ValueError(f"{text!r}: after env: comes a variable name, like env:OIDC_CLIENT_SECRET")
    elif text.startswith(VAULT_PREFIX) and not _VAULT_PATH.match(text.removeprefix(VAULT_PREFIX)):
        raise ValueError(
            f"{text!r}: a Vault reference is vault:mount/path#field, like vault:secret/llmgw/oidc#secret"
        )
    return text


def uses_vault(reference: str) -> bool:
    """Whether reading this reference needs `secrets.vault`."""
    return reference.startswith((VAULT_PREFIX, TRANSIT_PREFIX))


SecretReference = Annotated[str, AfterValidator(check_secret_reference)]
"""A file path, `env:VARIABLE` or `vault:mount/path#field`; empty where optional."""


def resolve_secret(
    reference: str,
    setting: str,
    *,
    environ: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
    vault: Mapping[str, str] | None = None,
) -> str:
    """The secret a `SecretReference` names: the variable of `env:NAME`, the file's text
    (a relative path is taken from `base_dir`, the configuration's folder), or for
    `vault:mount/path#field` the value read from Vault when the server started
    (`vault`, keyed by reference: `llmgw.secrets.runtime.open_secrets` reads every one
    before anything starts, so this stays a plain function). Surrounding whitespace is
    stripped. `setting` names the field in the one-sentence `ConfigError` raised when the
    secret cannot be had; the message names the reference, never the secret.

    The one resolver every secret-bearing setting uses (`auth.oidc.client_secret_file`,
    `auth.scim.token_file`, `notify.webhooks[].secret_file`, `secrets.master_key`)."""
    if reference.startswith(ENV_PREFIX):
        name = reference.removeprefix(ENV_PREFIX)
        value = (os.environ if environ is None else environ).get(name, "").strip()
        if not value:
            raise ConfigError([f"{setting}: environment variable {name} is unset or empty: export it"])
        return value
    if reference.startswith(VAULT_PREFIX):
        if vault is None or reference not in vault:
            raise ConfigError(
                [
                    f"{setting}: {reference!r} was not read from Vault: configure secrets.vault "
                    "(address and credentials), or give a file or env:VARIABLE"
                ]
            )
        return vault[reference]
    if reference.startswith(TRANSIT_PREFIX):
        raise ConfigError([f"{setting}: {reference!r} is a transit key, not a secret to read"])
    path = Path(reference.removeprefix(FILE_PREFIX)).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        value = path.read_text().strip()
    except OSError as exc:
        raise ConfigError([f"{setting}: cannot read {path} ({exc.strerror or exc}): check the path"]) from exc
    if not value:
        raise ConfigError([f"{setting}: {path} is empty: put the secret in it"])
    return value


def _not_from_vault(text: str) -> str:
    if text.startswith(VAULT_PREFIX):
        raise ValueError(
            f"{text!r}: Vault's own credentials cannot come from Vault: give a file or env:VARIABLE"
        )
    return check_secret_reference(text)


VaultCredential = Annotated[str, AfterValidator(_not_from_vault)]


class Vault(Strict):
    """How `vault:` references and `vault-transit:` sealing reach Vault.

    Authenticates with a token read from `token_file`, or with AppRole (`role_id` and
    the secret id in `secret_id_file`), which renews itself and suits a service better
    than a long-lived token. Empty `address` means no Vault.
    """

    address: OptionalHttpURL = ""
    """Vault's address, like https://vault.internal:8200."""
    namespace: str = ""
    """Vault Enterprise / HCP namespace; empty is the root."""
    ca_file: str = ""
    """PEM authority Vault's certificate is checked against; empty trusts the system's."""
    token_file: VaultCredential = ""
    """A file (or env:VARIABLE) holding a Vault token."""
    role_id: str = ""
    """AppRole role id; given with `secret_id_file`, instead of `token_file`."""
    secret_id_file: VaultCredential = ""
    """A file (or env:VARIABLE) holding the AppRole secret id."""
    approle_mount: str = "approle"
    """Where the AppRole auth method is mounted."""
    transit_mount: str = "transit"
    """Where the transit engine used by `master_key: vault-transit:KEY` is mounted."""

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    @model_validator(mode="after")
    def _one_way_in(self) -> Vault:
        problems: list[Problem] = []
        if not self.address:
            for name in ("namespace", "ca_file", "token_file", "role_id", "secret_id_file"):
                if getattr(self, name):
                    problems.append(
                        Problem(
                            (name,),
                            f"{name} is set but address is empty: give Vault's address, "
                            "like https://vault.internal:8200, or remove it",
                        )
                    )
        else:
            approle = bool(self.role_id or self.secret_id_file)
            if self.token_file and approle:
                problems.append(
                    Problem(("token_file",), "give token_file or AppRole (role_id, secret_id_file), not both")
                )
            elif not self.token_file and not approle:
                problems.append(
                    Problem(
                        ("address",),
                        f"Vault at {self.address} has no credentials: give token_file, "
                        "or role_id with secret_id_file",
                    )
                )
            elif approle and not (self.role_id and self.secret_id_file):
                missing = "secret_id_file" if self.role_id else "role_id"
                problems.append(
                    Problem((missing,), f"AppRole needs both role_id and secret_id_file: give {missing}")
                )
        refuse("Vault", problems)
        return self


class Secrets(Strict):
    """Vault access, and the key protecting secrets that llmgw stores in its database.

    Every `vault:` reference is read when the server starts (`llmgw.secrets.runtime`);
    one that cannot be read stops the start. See docs/operations.md, "Secrets".
    """

    vault: Vault = Field(default_factory=Vault)
    master_key: SecretReference = ""
    """Encrypts llmgw's own secrets at rest (engine keys are derived from them), so a
    stolen database or backup reveals nothing. Either `vault-transit:KEY`, encryption
    done inside Vault without the key ever leaving it, or a reference to a 64-hex-digit
    key (`openssl rand -hex 32`) that then needs the same care as the database. Empty:
    no encryption. Older plaintext values get encrypted the next time they are read.
    `llmgw server rotate-master-key --new-key REF` seals everything again under another key."""

    @model_validator(mode="after")
    def _transit_needs_vault(self) -> Secrets:
        if self.master_key.startswith(TRANSIT_PREFIX):
            key = self.master_key.removeprefix(TRANSIT_PREFIX)
            problems = []
            if not key or "/" in key:
                problems.append(
                    Problem(
                        ("master_key",),
                        f"{self.master_key!r}: name one transit key, like vault-transit:llmgw",
                    )
                )
            if not self.vault.enabled:
                problems.append(
                    Problem(
                        ("master_key",),
                        f"{self.master_key!r} seals with Vault, but secrets.vault.address is empty: "
                        "configure secrets.vault",
                    )
                )
            refuse("Secrets", problems)
        return self

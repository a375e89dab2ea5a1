"""The bearer token an identity provider presents to /scim/v2, read from
`auth.scim.token_file`: a file's first line, or `env:NAME`'s value.

Read once when the server starts, so a missing token stops the start with a sentence
naming the setting rather than refusing every provisioning request later. A `vault:`
reference is refused for now: nothing in this version reads Vault.
"""

from __future__ import annotations

import os
from pathlib import Path

from llmgw.config.secrets import ENV_PREFIX, VAULT_PREFIX
from llmgw.errors import ConfigError

# A shorter token is guessable; providers generate long ones (Entra takes any string).
MIN_TOKEN_CHARS = 16


def read_token(reference: str) -> str:
    """The token `reference` names; `ConfigError` naming auth.scim.token_file and the fix
    when it cannot be read or is too short to be a secret."""
    where = "auth.scim.token_file"
    if reference.startswith(ENV_PREFIX):
        name = reference.removeprefix(ENV_PREFIX)
        token = os.environ.get(name, "").strip()
        if not token:
            raise ConfigError(
                [f"{where}: environment variable {name} is empty or unset: export the SCIM token in it"]
            )
    elif reference.startswith(VAULT_PREFIX):
        raise ConfigError(
            [
                f"{where}: {reference!r} is a Vault reference, which this version does not read: "
                "use a file or env:NAME"
            ]
        )
    else:
        path = Path(reference).expanduser()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError([f"{where}: cannot read {path}: {exc}; write the SCIM token into it"]) from None
        token = lines[0].strip() if lines else ""
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            [
                f"{where}: the SCIM token is {len(token)} characters, fewer than {MIN_TOKEN_CHARS}: "
                "use a long random one, like `openssl rand -hex 32`"
            ]
        )
    return token

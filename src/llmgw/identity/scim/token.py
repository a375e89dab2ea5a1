"""The bearer token an identity provider presents to /scim/v2, read from
`auth.scim.token_file` (a file, or `env:NAME`) by the one secret resolver.

Read once when the server starts, so a missing token stops the start with a sentence
naming the setting rather than refusing every provisioning request later.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from llmgw.config.secrets import resolve_secret
from llmgw.errors import ConfigError

# A shorter token is guessable; providers generate long ones (Entra takes any string).
MIN_TOKEN_CHARS = 16
_SETTING = "auth.scim.token_file"


def read_token(
    reference: str, *, base_dir: Path | None = None, vault: Mapping[str, str] | None = None
) -> str:
    """The token `reference` names; `ConfigError` naming auth.scim.token_file and the fix
    when it cannot be read or is too short to be a secret."""
    token = resolve_secret(reference, _SETTING, base_dir=base_dir, vault=vault)
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            [
                f"{_SETTING}: the SCIM token is {len(token)} characters, fewer than {MIN_TOKEN_CHARS}: "
                "use a long random one, like `openssl rand -hex 32`"
            ]
        )
    return token

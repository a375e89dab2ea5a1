"""From an ID token's claims to who is signing in: the claims mapping of
`auth.oidc.claims`, the `allowed_domains` check, and the name a new person gets.

Pure functions: claims in, a `Profile` (or a `SignInRefused`) out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from llmgw.config.identity import OIDCClaims
from llmgw.errors import SignInRefused

# A person's id is also how operators type them (`llmgw users show alice`): keep the
# characters a shell and a URL path take without quoting.
_ID_UNSAFE = re.compile(r"[^a-z0-9._@-]+")
MAX_ID_CHARS = 64
MAX_GROUPS = 1000


@dataclass(frozen=True, slots=True)
class Profile:
    """Who the identity provider says is signing in."""

    subject: str
    username: str
    email: str | None
    email_verified: bool | None
    name: str | None
    groups: tuple[str, ...]


def profile(claims: Mapping[str, Any], mapping: OIDCClaims) -> Profile:
    """The profile the mapped claims give; a claim of the wrong type is left out
    rather than trusted (a provider sending a number for an e-mail is misconfigured)."""
    email = _text(claims.get(mapping.email))
    verified = claims.get("email_verified")
    return Profile(
        subject=str(claims["sub"]),
        username=_text(claims.get(mapping.username)) or "",
        email=email.lower() if email else None,
        email_verified=verified if isinstance(verified, bool) else None,
        name=_text(claims.get(mapping.name)),
        groups=_groups(claims.get(mapping.groups)) if mapping.groups else (),
    )


def check_domain(found: Profile, allowed: tuple[str, ...]) -> None:
    """Refuses a person whose address is outside `allowed_domains` (when it names any),
    or who has no address to check."""
    if not allowed:
        return
    if not found.email or "@" not in found.email:
        raise SignInRefused(
            "the identity provider sent no e-mail address, and only addresses of "
            f"{', '.join(allowed)} may sign in: ask for the email scope or claim",
            code="domain_not_allowed",
        )
    domain = found.email.rsplit("@", 1)[1]
    if domain not in allowed:
        raise SignInRefused(
            f"addresses at {domain} may not sign in here (allowed: {', '.join(allowed)}): "
            "ask an operator to add the domain to auth.oidc.allowed_domains",
            code="domain_not_allowed",
        )


def person_ids(found: Profile) -> Iterator[str]:
    """Ids to try, in order, for a new person: the user name (or the address) made safe,
    then with -2, -3... (bounded); last, one derived from the subject, unique as it is."""
    base = _safe_id(found.username) or _safe_id(found.email or "")
    if base:
        yield base
        for n in range(2, 10):
            yield f"{base[: MAX_ID_CHARS - 3]}-{n}"
    yield "oidc-" + hashlib.sha256(found.subject.encode()).hexdigest()[:16]


def _safe_id(text: str) -> str:
    return _ID_UNSAFE.sub("-", text.strip().lower()).strip("-.")[:MAX_ID_CHARS]


def _text(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _groups(value: object) -> tuple[str, ...]:
    # Entra ID sends a list of object ids, Keycloak a list of paths, some providers one
    # string: all become a tuple of names, bounded so a huge claim costs nothing.
    if isinstance(value, str):
        return (value,) if value else ()
    if not isinstance(value, list):
        return ()
    return tuple(sorted({item for item in value[:MAX_GROUPS] if isinstance(item, str) and item}))

"""People from an identity provider: sign-in through OpenID Connect, and accounts kept
in step by SCIM provisioning.

Both live under `auth:` because both feed the accounts of the auth store; neither does
anything while `auth.enabled` is off.
"""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.config.secrets import SecretReference
from llmgw.config.values import OptionalHttpURL, is_loopback_host
from llmgw.core.strict import Strict

_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")


def _email_domain(text: str) -> str:
    if not _DOMAIN.match(text.lower()):
        raise ValueError(f"{text!r} is not an e-mail domain: write it like example.com, without the @")
    return text.lower()


EmailDomain = Annotated[str, AfterValidator(_email_domain)]


class OIDCClaims(Strict):
    """Which ID-token claims an account's details are read from; providers disagree."""

    username: str = "preferred_username"
    """The claim that becomes the account's user name."""
    email: str = "email"
    """The claim holding the e-mail address that `allowed_domains` is checked against."""
    name: str = "name"
    """The claim holding the display name."""
    groups: str = "groups"
    """Groups become team memberships where a team is mapped to one; empty reads none."""


class OIDC(Strict):
    """Sign-in through an OpenID Connect provider (Keycloak, Entra ID, Google, Okta…).

    On when `issuer` is set (and `auth.enabled`). The client is a confidential one using
    the authorization code flow with PKCE; the provider must list `redirect_url` as an
    allowed callback. docs/identity.md wires Keycloak, Entra ID and Okta.
    """

    issuer: OptionalHttpURL = ""
    """The provider's issuer URL, whose /.well-known/openid-configuration is read."""
    client_id: str = ""
    """The client id the provider issued for llmgw."""
    client_secret_file: SecretReference = ""
    """Where the client secret is: a file, env:VARIABLE or vault:mount/path#field."""
    redirect_url: OptionalHttpURL = ""
    """The callback the provider returns to: the gateway's client address followed by
    /auth/callback, as the browser reaches it (https://llm.example.com/auth/callback).
    Empty builds it from the address the browser used, which is right unless a proxy
    rewrites it. An https:// one also marks the session cookie Secure."""
    scopes: tuple[str, ...] = ("openid", "profile", "email")
    """Scopes asked for; openid is required."""
    claims: OIDCClaims = Field(default_factory=OIDCClaims)
    allowed_domains: tuple[EmailDomain, ...] = ()
    """E-mail domains allowed to sign in; empty lets anyone the provider vouches for.
    A newcomer is active at once unless `auth.signup_open` makes them wait for approval."""
    display_name: str = ""
    """The sign-in button's label; empty is "Single sign-on"."""

    @property
    def enabled(self) -> bool:
        return bool(self.issuer)

    @model_validator(mode="after")
    def _complete(self) -> OIDC:
        if self.redirect_url and urlsplit(self.redirect_url).path in ("", "/"):
            refuse(
                "OIDC",
                [
                    Problem(
                        ("redirect_url",),
                        f"{self.redirect_url} has no path: give the callback, like "
                        "https://llm.example.com/auth/callback",
                    )
                ],
            )
        problems: list[Problem] = []
        if not self.issuer:
            for name in ("client_id", "client_secret_file", "redirect_url"):
                if getattr(self, name):
                    problems.append(
                        Problem((name,), f"{name} is set but issuer is empty: give the provider's issuer URL")
                    )
            refuse("OIDC", problems)
            return self
        if self.issuer.startswith("http://") and not _loopback_url(self.issuer):
            problems.append(
                Problem(
                    ("issuer",), f"{self.issuer} is plain HTTP: an identity provider is reached over https://"
                )
            )
        if not self.client_id:
            problems.append(
                Problem(("client_id",), "is required with an issuer: the client id the provider gave")
            )
        if not self.client_secret_file:
            problems.append(
                Problem(
                    ("client_secret_file",),
                    "is required with an issuer: "
                    "where the client secret is (a file, env:VARIABLE or vault:…)",
                )
            )
        if "openid" not in self.scopes:
            problems.append(
                Problem(("scopes",), f"{list(self.scopes)} lacks openid, without which there is no ID token")
            )
        refuse("OIDC", problems)
        return self


def _loopback_url(url: str) -> bool:
    return is_loopback_host(urlsplit(url).hostname or "")


class SCIM(Strict):
    """Provisioning by the identity provider through SCIM 2.0 at /scim/v2: accounts made,
    changed and disabled as the provider's directory changes, rather than by hand.

    Served on the client port (llmgw.identity.scim) while `auth.enabled` is on; docs/identity.md
    shows Entra ID and Okta wired to it.
    """

    enabled: bool = False
    """Serves the SCIM endpoints to the provider."""
    token_file: SecretReference = ""
    """The bearer token the provider presents: a file (its first line) or env:VARIABLE,
    read once at start; at least 16 characters."""

    @model_validator(mode="after")
    def _token(self) -> SCIM:
        if self.enabled and not self.token_file:
            refuse(
                "SCIM",
                [
                    Problem(
                        ("token_file",),
                        "is required when SCIM is enabled: the bearer token the provider sends",
                    )
                ],
            )
        return self

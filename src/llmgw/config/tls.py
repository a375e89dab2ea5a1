"""TLS material for one connection: `agent_tls` (the fleet port, where both ends show a
certificate) and `mirror.tls` (this control plane as a client of the model mirror).

Only the shape is checked here. Whether the files exist is not: `llmgw config check`
may run on a laptop, before the files the configuration names are put in place.
"""

from __future__ import annotations

from typing import Any

from pydantic import field_validator, model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.core.strict import Strict

TLS_VERSIONS: tuple[str, ...] = ("1.2", "1.3")


class TLS(Strict):
    """Certificates and the CA that checks the other end.

    On the agent port, `cert_file`/`key_file` are the control plane's own certificate
    and `ca_file` is the authority an agent's certificate must be signed by. As a client
    (the mirror), `cert_file`/`key_file` are the certificate presented to the server and
    `ca_file` the authority its certificate must be signed by; empty trusts the system's
    authorities. Each file may be relative to the working directory.
    """

    cert_file: str = ""
    """PEM certificate, chain after the leaf. Given with `key_file` or not at all."""
    key_file: str = ""
    """PEM private key of `cert_file`; keep it 0600."""
    ca_file: str = ""
    """PEM bundle of the authorities the other end's certificate must chain to."""
    server_name: str = ""
    """As a client, the name the server's certificate must carry when it is not the host
    of the address dialled (a mirror reached by IP). Empty is that host."""
    min_version: str = "1.2"
    """The oldest protocol version accepted: 1.2 or 1.3."""

    @property
    def enabled(self) -> bool:
        """Whether any TLS material is configured at all."""
        return bool(self.cert_file or self.key_file or self.ca_file)

    @field_validator("min_version", mode="before")
    @classmethod
    def _version_as_text(cls, value: Any) -> Any:
        # YAML reads an unquoted 1.2 as a number; the intent is plain.
        if isinstance(value, float):
            return f"{value:.1f}"
        return value

    @field_validator("min_version")
    @classmethod
    def _known_version(cls, value: str) -> str:
        if value not in TLS_VERSIONS:
            raise ValueError(f"TLS {value!r} is not offered: use 1.2 or 1.3")
        return value

    @model_validator(mode="after")
    def _pairs(self) -> TLS:
        problems: list[Problem] = []
        if self.cert_file and not self.key_file:
            problems.append(
                Problem(("key_file",), f"cert_file {self.cert_file!r} has no key: give key_file as well")
            )
        if self.key_file and not self.cert_file:
            problems.append(
                Problem(
                    ("cert_file",), f"key_file {self.key_file!r} has no certificate: give cert_file as well"
                )
            )
        refuse("TLS", problems)
        return self

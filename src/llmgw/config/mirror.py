"""The model mirror managed from this control plane, and offline mode, where every node
gets everything from that mirror.

The mirror runs on its own storage host. The control plane only talks to its API, with
credentials; it is never given a path on the mirror's disk. Direct write access would
let a compromised control plane swap weights that every node then downloads in good
faith.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, model_validator

from llmgw.config.checks import Problem, refuse
from llmgw.config.tls import TLS
from llmgw.config.values import NonNegativeDuration, OptionalHttpURL
from llmgw.core.strict import Strict

DEFAULT_OFFLINE_CHECKSUMS = "/etc/llmgw/offline.sha256"
DEFAULT_MIRROR_TIMEOUT = timedelta(seconds=30)
MIRROR_MANAGEMENT_PORT = 8082
MIRROR_FILES_PORT = 8081


class Mirror(Strict):
    """A model mirror managed through its API. Empty `api` means none, and the admin
    mirror pages stay off.

    Not acted on by this version (`llmgw.config.inert` says what does not happen):
    the settings are checked, and the server warns when a file uses them.
    """

    api: OptionalHttpURL = ""
    """Base URL of the mirror's admin API (by convention port 8082), e.g.
    https://models.internal:8082. Kept apart from the download port so access to it can
    be restricted without reconfiguring the agents."""
    tls: TLS = Field(default_factory=TLS)
    """Certificates for calling the admin API, normally issued by the cluster CA. Left
    empty, calls go over plain HTTP, which is only safe on a closed network."""
    registry: OptionalHttpURL = ""
    """Registry searched from the console's mirror page. Empty uses huggingface.co;
    point it at an in-house registry proxy on networks without internet access."""
    timeout: NonNegativeDuration = timedelta(0)
    """Deadline for a single admin API call. Downloads are not covered, since the mirror
    replies once a download begins. 0 is 30s."""
    update_check: NonNegativeDuration = timedelta(hours=6)
    """Interval between checks for new upstream revisions of served models (same repo
    name, new files). Findings are reported, never applied; `llmgw ctl model update`
    applies them. 0 disables the check."""

    @property
    def enabled(self) -> bool:
        return bool(self.api)

    @property
    def effective_timeout(self) -> timedelta:
        return self.timeout or DEFAULT_MIRROR_TIMEOUT

    @model_validator(mode="after")
    def _tls_needs_https(self) -> Mirror:
        if self.tls.enabled and self.api.startswith("http://"):
            refuse(
                "Mirror",
                [
                    Problem(
                        ("api",), f"{self.api} is plain HTTP but tls is configured: use https://, or drop tls"
                    )
                ],
            )
        return self


class Offline(Strict):
    """An air-gapped cluster.

    Agents fetch weights from the mirror instead of the Internet. Putting files on the
    mirror is up to the operator: this version has no command that prepares or loads
    bundles, and installs neither engines nor releases.
    """

    mirror: str = ""
    """Download URL of the mirror as seen from the nodes (port 8081 by convention, not
    the admin port), e.g. http://10.0.0.5:8081. Setting it switches the cluster to
    offline mode: agents fetch weights from here. Engines are installed on the nodes by
    hand in this version."""
    checksums: str = ""
    """Checksum list for engine downloads. This version downloads no engines, so nothing
    reads it (`llmgw.config.inert`). Empty: /etc/llmgw/offline.sha256."""

    @property
    def enabled(self) -> bool:
        return bool(self.mirror)

    @property
    def checksums_file(self) -> str:
        return self.checksums or DEFAULT_OFFLINE_CHECKSUMS

    @property
    def releases_base(self) -> str:
        """Where the mirror keeps llmgw's releases."""
        return self.mirror.rstrip("/") + "/_llmgw/releases"

    @model_validator(mode="after")
    def _files_port(self) -> Offline:
        problems: list[Problem] = []
        if self.mirror and not self.mirror.startswith(("http://", "https://")):
            problems.append(
                Problem(
                    ("mirror",),
                    f"{self.mirror!r} lacks http:// or https://: use the mirror's download URL, "
                    f"e.g. http://host:{MIRROR_FILES_PORT}",
                )
            )
        elif self.mirror.rstrip("/").endswith(f":{MIRROR_MANAGEMENT_PORT}"):
            problems.append(
                Problem(
                    ("mirror",),
                    f"{self.mirror!r} points at the admin API port; nodes download from the "
                    f"file port, :{MIRROR_FILES_PORT}",
                )
            )
        refuse("Offline", problems)
        return self

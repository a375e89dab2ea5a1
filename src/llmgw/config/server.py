"""`Settings`, the whole server configuration: one tree, read from YAML and `LLMGW_`
variables, validated as a whole, frozen once built.

Every default is declared once, on its field. Fields whose subsystem does not exist yet
are still read and checked, so a file written today loads unchanged the day the
feature lands; `llmgw.config.inert` lists them, and the server warns about each one a
file uses. Rules about one section live on that section's model; rules across
sections live in `llmgw.config.rules`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from llmgw.catalog import Catalog, Model
from llmgw.config import rules
from llmgw.config.auth import Auth
from llmgw.config.backup import (
    DEFAULT_BACKUP_DIR,
    BackupRecipient,
    BackupRecipientText,
    CopyTargetText,
    TimeOfDayText,
    parse_backup_recipients,
)
from llmgw.config.checks import Problem, refuse
from llmgw.config.control import Control, Facility, Federation
from llmgw.config.endpoints import Endpoint, Endpoints
from llmgw.config.engines import EngineOverride, EngineVersions, engines_for, wanted_engines
from llmgw.config.firewall import Firewall, allowed_networks
from llmgw.config.guard import Guard
from llmgw.config.mirror import Mirror, Offline
from llmgw.config.notify import Notify
from llmgw.config.observability import Monitoring, Tracing, check_log_format
from llmgw.config.portal import Landing, Threads
from llmgw.config.router import Router
from llmgw.config.secrets import Secrets
from llmgw.config.tls import TLS
from llmgw.config.values import (
    IPNetwork,
    ListenAddress,
    NetworkText,
    NonNegativeInt,
    OptionalListenAddress,
    PositiveInt,
)
from llmgw.errors import CatalogError

ENV_PREFIX = "LLMGW_"
DEFAULT_STORE_FILE = "llmgw.db"
"""The store's file name where `auth.store` is empty and a control plane needs one."""
_INDEXED = re.compile(r"^models\[(\d+)\]: (.*)$", re.DOTALL)
ENV_NESTED_DELIMITER = "__"


def _served(endpoints: Iterable[Endpoint]) -> set[str]:
    """The model names static replicas serve."""
    return {name for endpoint in endpoints for name in endpoint.models}


class Settings(BaseSettings):
    """The server configuration (the file `llmgw server --config` reads)."""

    model_config = SettingsConfigDict(
        frozen=True,
        extra="forbid",
        validate_default=True,
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        case_sensitive=False,
    )

    listen: ListenAddress = ":8080"
    """The client-facing OpenAI API."""
    admin_listen: ListenAddress = "127.0.0.1:9090"
    """Dashboard, management API, health checks and the profiler. It defaults to this
    machine only, and should stay there: a memory dump of the process would expose the
    API keys clients sent. Any other address also takes `admin_remote: true`."""
    metrics_listen: OptionalListenAddress = ""
    """Prometheus metrics and nothing else, so a fleet can be scraped while the admin
    listener stays private. Empty is off; metrics are on admin_listen either way."""
    agent_listen: ListenAddress = ":7443"
    """Where node agents connect, apart from clients so it can be firewalled apart."""
    auth: Auth = Field(default_factory=Auth)
    threads: Threads = Field(default_factory=Threads)
    landing: Landing = Field(default_factory=Landing)
    agent_tls: TLS = Field(default_factory=TLS)
    """Certificates for the agent port, where agent and control plane each prove who
    they are. The client port is separate: it usually sits behind a certificate from a
    public authority, which is a different trust arrangement."""
    max_connections: NonNegativeInt = 10_000
    """Cap on simultaneous client connections; extra ones queue in the operating
    system's accept queue. 0 removes the cap."""
    admin_token_file: str = ""
    """File with the bearer token required on the admin API (/api, /debug). Created with
    mode 0600 at start if absent. Empty: `admin-token` in the service's state directory
    (/var/lib/llmgw under systemd), else `secrets/admin-token` next to this file."""
    admin_remote: bool = False
    """Permits admin_listen on a non-loopback address. Requests still need the token,
    which then travels unencrypted unless a TLS proxy sits in front."""
    debug_pprof: bool = False
    """Serves a sampling CPU profile, the asyncio tasks' stacks and the top allocations
    under /debug/pprof/ on the admin listener (token required; see
    docs/observability.md#profiling). Off by default because a memory profile contains
    the keys of recent requests."""
    agent_insecure: bool = False
    """Accepts running the agent port with no agent_tls. Traffic is then unencrypted and
    unauthenticated: anything that can connect could pose as a node and receive
    prompts. Without an explicit agent_listen host it binds loopback only. Meant for
    single-machine setups, tests and fully trusted networks."""
    monitoring: Monitoring = Field(default_factory=Monitoring)
    tracing: Tracing = Field(default_factory=Tracing)
    log_format: str = "text"
    """How log lines are written on stderr: text, for a person, or json, one object a
    line for a log pipeline. `llmgw server --log-format` overrides it."""
    mirror: Mirror = Field(default_factory=Mirror)
    offline: Offline = Field(default_factory=Offline)
    engines: EngineVersions = Field(default_factory=dict)
    """Per-engine versions the agents install, overriding DEFAULT_ENGINES; a blank
    version means agents skip that engine (install it yourself if wanted)."""
    engine_overrides: tuple[EngineOverride, ...] = ()
    """Different engines for some nodes, applied in order over `engines`."""
    backup_dir: str = ""
    """Where `llmgw server backup` writes its archives (mode 0700), and where the newest
    one's time is read for llmgw_backup_last_success_timestamp_seconds. Empty:
    /var/backups/llmgw-server."""
    backup_keep: PositiveInt = 7
    """How many archives are kept, here and at each backup_copy_to destination: the
    newest ones; older ones are deleted once a new archive is written."""
    backup_schedule: TimeOfDayText = ""
    """A time of day (HH:MM, UTC) at which the server runs the backup itself, every day;
    a failure sends the backup.failed event. Empty: only `llmgw server backup` (from
    cron or a timer) writes archives. On a shared store, set it on one server."""
    guard: Guard = Field(default_factory=Guard)
    secrets: Secrets = Field(default_factory=Secrets)
    notify: Notify = Field(default_factory=Notify)
    firewall: Firewall = Field(default_factory=Firewall)
    firewall_networks: tuple[NetworkText, ...] = ()
    """Extra networks (addresses or CIDR prefixes) allowed through to llmgw's internal
    ports, on top of the networks the machines themselves sit on."""
    backup_recipients: tuple[BackupRecipientText, ...] = ()
    """Public keys archives are encrypted for: age1… recipients or SSH public keys.
    With none, archives are plain files protected only by root-only permissions."""
    backup_copy_to: tuple[CopyTargetText, ...] = ()
    """Extra destinations for each finished archive: an absolute directory (say a
    network mount) or ssh://user@host[:port]/path. Retention there matches the local
    one. Requires backup_recipients, so nothing leaves the machine in clear."""
    backup_copy_key: str = ""
    """Private key file used for ssh:// destinations. Host keys are pinned in
    backup_known_hosts beside the configuration (/etc/llmgw/backup_known_hosts) on first
    contact (trust on first use)."""
    releases: str = ""
    """Base URL of llmgw's release binaries. This version has no upgrade command, so
    nothing downloads from it (`llmgw.config.inert`). Empty: upstream releases, or the
    mirror when offline."""
    router: Router = Field(default_factory=Router)
    control: Control = Field(default_factory=Control)
    # Endpoints are declared before models so the catalog check below can see which
    # models static replicas serve.
    endpoints: Endpoints = ()
    """Static replicas the router sends requests to, beside whatever a control plane
    places (see `control_plane_mode`)."""
    models: tuple[Model, ...] = ()
    """Models defined in this file. Runtime additions live in the store instead."""
    facility: Facility = Field(default_factory=Facility)
    federation: Federation = Field(default_factory=Federation)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Constructing Settings never reads the process environment behind the caller's
        # back: the loader overlays the environment it is given (llmgw.config.environment).
        return (init_settings,)

    @field_validator("log_format")
    @classmethod
    def _known_log_format(cls, value: str) -> str:
        return check_log_format(value)

    @field_validator("models")
    @classmethod
    def _catalog_accepts(cls, models: tuple[Model, ...], info: ValidationInfo) -> tuple[Model, ...]:
        # The catalog owns every rule about a model, so they live in one place.
        try:
            Catalog.build(models, served_statically=_served(info.data.get("endpoints", ())))
        except CatalogError as exc:
            refuse("Catalog", [_catalog_problem(problem) for problem in exc.problems])
        return models

    @model_validator(mode="after")
    def _across_sections(self) -> Settings:
        refuse("Settings", rules.check(self))
        return self

    def catalog(self) -> Catalog:
        """The models of this file, normalised and resolved. A model a static endpoint
        serves may be a bare name: in router-only mode nothing is placed for it."""
        return Catalog.build(self.models, served_statically=_served(self.endpoints))

    @property
    def control_plane_mode(self) -> bool:
        """Whether to start the control plane. The only router-only shape is a static
        endpoint list and no model with profiles (nothing could be placed anyway). Files
        without endpoints get a control plane even with no models, since a router alone
        would have nothing to send traffic to; a fresh cluster looks exactly like that."""
        if self.control.enabled or not self.endpoints:
            return True
        return any(model.profiles for model in self.models)

    def wanted_engines(self) -> dict[str, str]:
        """DEFAULT_ENGINES with `engines` laid over it."""
        return wanted_engines(self.engines)

    def engines_for(self, node: str, classes: Iterable[str], labels: Mapping[str, str]) -> dict[str, str]:
        """What one node installs, after every engine override that picks it."""
        return engines_for(self.engines, self.engine_overrides, node, classes, labels)

    @property
    def releases_base(self) -> str:
        """Where releases come from: `releases`, the mirror's copy when offline, or empty
        for the project's own."""
        if self.releases:
            return self.releases
        return self.offline.releases_base if self.offline.enabled else ""

    def firewall_allow(self) -> tuple[IPNetwork, ...]:
        return allowed_networks(self.firewall_networks)

    def backup_recipient_keys(self) -> tuple[BackupRecipient, ...]:
        return parse_backup_recipients(self.backup_recipients)

    @property
    def effective_backup_dir(self) -> str:
        return self.backup_dir or DEFAULT_BACKUP_DIR

    def effective_store(self, config_dir: Path | None, state_directory: str | None) -> str:
        """The store a server opens: `auth.store` as set, else the SQLite file `llmgw.db`
        beside the admin token (see `effective_admin_token_file`). With auth off it holds
        what the control plane keeps: the runtime catalog, the lease and the cluster's
        secret, which engine keys derive from; hence beside the other secret."""
        if self.auth.store:
            return self.auth.store
        return str(self.effective_admin_token_file(config_dir, state_directory).parent / DEFAULT_STORE_FILE)

    def effective_admin_token_file(self, config_dir: Path | None, state_directory: str | None) -> Path:
        """The admin token's file: as set, else in the service's state directory (systemd's
        STATE_DIRECTORY), else secrets/admin-token beside the configuration."""
        if self.admin_token_file:
            return Path(self.admin_token_file)
        if state_directory:
            return Path(state_directory) / "admin-token"
        return (config_dir or Path()) / "secrets" / "admin-token"


def _catalog_problem(text: str) -> Problem:
    # The catalog names an unnamed model by its index; file it there rather than
    # repeating "models" in front of it.
    found = _INDEXED.match(text)
    if found is None:
        return Problem((), text)
    return Problem((int(found.group(1)),), found.group(2))

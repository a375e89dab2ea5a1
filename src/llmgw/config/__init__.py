"""llmgw's server settings: the tree of typed, frozen models read from one YAML file
and `LLMGW_` environment variables, validated as a whole.

`load_settings(path, environ)` is the one way in; `render_effective(settings)` is the
configuration in force, as YAML that loads back to the same thing. Values where zero
means "the built-in amount" keep what was written and offer an `effective_…` property
with the value in force.
"""

from llmgw.config.admission import Admission, Band
from llmgw.config.auth import Auth, Personal, Price
from llmgw.config.backup import (
    BackupRecipient,
    CopyTarget,
    parse_backup_recipient,
    parse_backup_recipients,
    parse_copy_target,
)
from llmgw.config.control import Control, Facility, FacilityBudget, FacilityPolicy, Federation, PowerBudget
from llmgw.config.endpoints import Endpoint
from llmgw.config.engines import DEFAULT_ENGINES, EngineOverride, engines_for, wanted_engines
from llmgw.config.environment import Overlay, read_environment
from llmgw.config.firewall import Firewall, allowed_networks
from llmgw.config.guard import Guard, GuardCheck, GuardPolicy
from llmgw.config.identity import OIDC, SCIM, OIDCClaims
from llmgw.config.limits import Batch, Cache
from llmgw.config.loading import load_settings, render_effective, settings_from_mapping, settings_from_yaml
from llmgw.config.mirror import DEFAULT_OFFLINE_CHECKSUMS, Mirror, Offline
from llmgw.config.notify import NOTIFY_EVENTS, Notify, Webhook
from llmgw.config.observability import Monitoring, Tracing
from llmgw.config.portal import Landing, Threads
from llmgw.config.router import KVIndex, Prefix, Router, Scoring, Timeouts
from llmgw.config.secrets import Secrets, Vault
from llmgw.config.server import Settings
from llmgw.config.tls import TLS

__all__ = [
    "DEFAULT_ENGINES",
    "DEFAULT_OFFLINE_CHECKSUMS",
    "NOTIFY_EVENTS",
    "OIDC",
    "SCIM",
    "TLS",
    "Admission",
    "Auth",
    "BackupRecipient",
    "Band",
    "Batch",
    "Cache",
    "Control",
    "CopyTarget",
    "Endpoint",
    "EngineOverride",
    "Facility",
    "FacilityBudget",
    "FacilityPolicy",
    "Federation",
    "Firewall",
    "Guard",
    "GuardCheck",
    "GuardPolicy",
    "KVIndex",
    "Landing",
    "Mirror",
    "Monitoring",
    "Notify",
    "OIDCClaims",
    "Offline",
    "Overlay",
    "Personal",
    "PowerBudget",
    "Prefix",
    "Price",
    "Router",
    "Scoring",
    "Secrets",
    "Settings",
    "Threads",
    "Timeouts",
    "Tracing",
    "Vault",
    "Webhook",
    "allowed_networks",
    "engines_for",
    "load_settings",
    "parse_backup_recipient",
    "parse_backup_recipients",
    "parse_copy_target",
    "read_environment",
    "render_effective",
    "settings_from_mapping",
    "settings_from_yaml",
    "wanted_engines",
]

"""Keys, tenancy, limits, budgets and usage accounting for the client port.

The request path talks to `AuthGate` only; `AdminApi` serves `/api` on the admin
listener; `UsageEvent` is what the request path hands over per finished request.
"""

from llmgw.auth import admin_token
from llmgw.auth.admin_api import AdminApi
from llmgw.auth.gate import Admission, AuthGate
from llmgw.auth.principal import Principal
from llmgw.auth.tags import parse_tags
from llmgw.auth.usage import UsageEvent

__all__ = ["AdminApi", "Admission", "AuthGate", "Principal", "UsageEvent", "admin_token", "parse_tags"]

"""Keys, tenancy, limits, budgets and usage accounting for the client port.

The request path talks to `AuthGate` only; `AdminApi` serves `/api` on the admin
listener.
"""

from llmgw.auth import admin_token
from llmgw.auth.admin_api import AdminApi
from llmgw.auth.gate import AuthGate
from llmgw.auth.principal import Principal
from llmgw.auth.tags import parse_tags

__all__ = ["AdminApi", "AuthGate", "Principal", "admin_token", "parse_tags"]

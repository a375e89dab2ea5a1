"""SCIM 2.0 provisioning at /scim/v2: an identity provider creates, changes, disables and
deletes people and groups; teams follow the groups they name.

`filter` and `patch` are pure functions over text and JSON; `resources` maps SCIM's
User and Group to llmgw's people and groups; `users` and `groups` are the routes over
the store; `app` is the RSGI application with the bearer-token check."""

from llmgw.identity.scim.app import PREFIX, ScimApp
from llmgw.identity.scim.token import read_token

__all__ = ["PREFIX", "ScimApp", "read_token"]

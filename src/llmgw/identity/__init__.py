"""People: OIDC sign-in, browser sessions, signup with approval, SCIM provisioning and
the roles a signed-in person holds.

`build_identity` makes the /auth and /signup application the server mounts on the
client port; its `sessions.signed_in(headers)` says who a browser request comes from
(a `SignedIn` with their roles, or None), for any route that serves people.
"""

from llmgw.identity.app import IdentityApp
from llmgw.identity.build import build_identity, purge_loop
from llmgw.identity.sessions import SessionManager, SignedIn

__all__ = ["IdentityApp", "SessionManager", "SignedIn", "build_identity", "purge_loop"]

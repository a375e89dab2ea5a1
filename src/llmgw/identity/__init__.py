"""People: OIDC sign-in, browser sessions, signup with approval, SCIM provisioning and
the roles a signed-in person holds."""

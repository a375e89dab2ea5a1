"""The admin API on the admin listener (`/api`, behind the admin token): tenancy, keys,
limits and usage (`api`, `handlers`, `models`), the control plane's routes under
`/api/control` (`control_routes`), and the token itself (`token`).

Nothing is imported here: the command line reads `llmgw.admin.token` and must not
bring in the store that the rest needs."""

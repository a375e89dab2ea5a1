"""Secrets at run time: reading `vault:` references from HashiCorp Vault (or OpenBao),
keeping the Vault token renewed, and sealing the secrets the store keeps under
`secrets.master_key`.

The settings' side (`SecretReference`, the one resolver `resolve_secret`) lives in
`llmgw.config.secrets`; this package does the I/O it needs and sits between the
settings and the store, so the store can seal with it.
"""

"""The cluster's certificates: its CA, the control plane's and each node's certificate,
join tokens and revocation."""

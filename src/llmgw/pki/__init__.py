"""The cluster's certificates: its CA, the control plane's and each node's certificate,
and when each runs out.

`authority` makes and signs (ECDSA P-256), `cluster` knows where the files live and
writes them (`files`: 0600 in folders 0700), `config_file` puts the `agent_tls` paths in
a configuration, and `expiry` says which certificates are due a warning. Revocation is
kept in the store (`llmgw.store.node_certs`), which this layer does not see: the command
line records what it issues and revokes there, and the control plane reads it.
"""

from __future__ import annotations

from llmgw.pki.authority import Issued, check_node_name, normal_serial, serial_text
from llmgw.pki.cluster import Bundle, ClusterFiles, init_cluster, issue_bundle
from llmgw.pki.expiry import WARN_AHEAD, CertificateEnd, expiring, peer_not_after, read_not_after, warning

__all__ = [
    "WARN_AHEAD",
    "Bundle",
    "CertificateEnd",
    "ClusterFiles",
    "Issued",
    "check_node_name",
    "expiring",
    "init_cluster",
    "issue_bundle",
    "normal_serial",
    "peer_not_after",
    "read_not_after",
    "serial_text",
    "warning",
]

"""llmgw's own firewall on every machine of the cluster.

Cluster-wide and applied without restarts: on a change to this or to
`firewall_networks` the leading control plane informs all agents, which add or delete
llmgw's nftables table. `firewall_networks` widens who may reach the internal ports
beyond the machines' own networks, e.g. a monitoring server or nodes in another subnet.
"""

from __future__ import annotations

from collections.abc import Iterable

from llmgw.config.values import IPNetwork, parse_network
from llmgw.core.strict import Strict


class Firewall(Strict):
    """Whether llmgw manages a firewall on its machines: an nftables table of its own
    (`inet llmgw`) that lets only the control planes, the gateways and
    `firewall_networks` reach the engines' ports (docs/operations.md, Firewall)."""

    enabled: bool = True
    """Off removes llmgw's table everywhere, and new machines are added without one."""


def allowed_networks(texts: Iterable[str]) -> tuple[IPNetwork, ...]:
    """`firewall_networks` as networks, an address being a network of one."""
    return tuple(parse_network(text) for text in texts)

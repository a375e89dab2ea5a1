"""The agent's side of the `firewall` message: llmgw's nftables table on this node.

The control plane says whether the table should exist, the engines' port range and the
networks allowed to it; the agent adds the control planes it was given (`--server`: each
runs a gateway that dials the engines) and the networks this machine sits on (its
neighbours: the other nodes of a multi-node replica), and applies it with `nft` in one
transaction.
Only an agent that manages the firewall (root, as the node's service, or `--firewall`)
has one of these; an agent without one ignores the message.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import subprocess
from collections.abc import Iterable, Sequence

from llmgw.agent.firewall import FirewallPlan, plan
from llmgw.agent.nft import Nft
from llmgw.protocol.messages import Firewall

log = logging.getLogger(__name__)


class NodeFirewall:
    """Applies `firewall` messages to this machine's llmgw table."""

    def __init__(self, nft: Nft, control_addresses: Sequence[str] = ()) -> None:
        self.nft = nft
        self.control_addresses = tuple(control_addresses)
        """Addresses of the control planes the agent dials and its own networks, always
        allowed."""
        self.applied: FirewallPlan | None = None
        """The plan last applied; None before the first."""

    def plan_for(self, message: Firewall) -> FirewallPlan:
        return plan(
            enabled=message.enabled,
            port_range=message.port_range,
            ports=message.ports,
            networks=(*self.control_addresses, *message.networks),
        )

    def apply(self, message: Firewall) -> bool:
        """Installs or removes the table (blocking: run it in a thread); False when it is
        already as `message` says. FirewallError where nft refuses; ValueError naming
        a network that is not one."""
        wanted = self.plan_for(message)
        if wanted == self.applied:
            return False
        self.nft.apply(wanted)
        self.applied = wanted
        if wanted.enabled:
            log.info(
                "firewall: llmgw's table guards ports %s, open to %s",
                ", ".join(f"{lo}-{hi}" for lo, hi in wanted.port_ranges),
                ", ".join(str(n) for n in wanted.allowed) or "loopback only",
            )
        else:
            log.info("firewall: off; llmgw's table removed")
        return True


def server_addresses(hosts: Iterable[str]) -> tuple[str, ...]:
    """The IP addresses `hosts` (names or addresses) resolve to now; a name that does not
    resolve adds none (the control plane's own address still comes with its message)."""
    found: list[str] = []
    for host in hosts:
        try:
            infos = socket.getaddrinfo(host.strip("[]"), None, proto=socket.IPPROTO_TCP)
        except OSError:
            log.warning("firewall: %s does not resolve; it is not allowed by address", host)
            continue
        for info in infos:
            address = str(info[4][0]).split("%", 1)[0]
            if address not in found:
                found.append(address)
    return tuple(found)


def own_networks(ip: str = "ip") -> tuple[str, ...]:
    """The networks this machine's interfaces sit on (`ip -j addr`), global scope only;
    none where `ip` is missing or fails."""
    try:
        done = subprocess.run(
            [ip, "-j", "addr", "show"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return networks_of_interfaces(done.stdout) if done.returncode == 0 else ()


def networks_of_interfaces(ip_json: str) -> tuple[str, ...]:
    """The global-scope networks in `ip -j addr show`'s output, each once."""
    try:
        interfaces = json.loads(ip_json or "[]")
    except ValueError:
        return ()
    found: list[str] = []
    for interface in interfaces if isinstance(interfaces, list) else []:
        for info in interface.get("addr_info", []):
            if info.get("scope") != "global" or "local" not in info or "prefixlen" not in info:
                continue
            network = str(ipaddress.ip_network(f"{info['local']}/{info['prefixlen']}", strict=False))
            if network not in found:
                found.append(network)
    return tuple(found)

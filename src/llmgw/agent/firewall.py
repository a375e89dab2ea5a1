"""llmgw's firewall on a node, as nftables text: which ports it guards and who may reach
them, turned into one ruleset. Pure: settings and addresses in, text out.

llmgw keeps exactly one table of its own (`inet llmgw`) and touches nothing else of the
host's rules. The table's input chain lets loopback, established connections and the
allowed sources (the control planes' and gateways' addresses, `firewall_networks`)
through to the guarded ports (the engines' `control.port_range`, plus any given), and
drops (and counts) every other packet to those ports. Other ports are not looked at: a packet this
table accepts still passes whatever else the host's own tables decide.

The text starts by declaring and deleting the table, so `nft -f` of it is one transaction
that replaces llmgw's table whole, whether it existed before or not (nft applies a file
atomically: all of it or none), and re-applying it is idempotent.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from llmgw.config.values import IPNetwork, parse_network

FAMILY = "inet"
TABLE = "llmgw"
"""`inet llmgw`: the one table llmgw owns on a machine."""
CHAIN = "input"
PORTS_SET = "guarded_ports"
ALLOWED_V4 = "allowed_v4"
ALLOWED_V6 = "allowed_v6"


@dataclass(frozen=True)
class FirewallPlan:
    """What the table should be on one machine."""

    enabled: bool
    """False: llmgw's table is removed, and nothing is guarded."""
    port_ranges: tuple[tuple[int, int], ...]
    """Inclusive port ranges guarded (TCP and UDP): the engines' range, llmgw's own ports."""
    allowed: tuple[IPNetwork, ...]
    """Sources let through to the guarded ports, beyond loopback."""


def plan(
    *,
    enabled: bool,
    port_range: tuple[int, int],
    ports: Iterable[int] = (),
    networks: Iterable[str] = (),
) -> FirewallPlan:
    """The plan for `enabled`, the engines' `port_range`, other guarded `ports`, and the
    allowed `networks` (addresses or CIDR prefixes; ValueError naming a bad one)."""
    ranges = (port_range, *((port, port) for port in ports))
    return FirewallPlan(
        enabled=enabled,
        port_ranges=merge_ranges(ranges),
        allowed=collapse(parse_network(text) for text in networks),
    )


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Inclusive ranges sorted, with overlapping and adjacent ones joined (an nft
    interval set refuses overlapping elements)."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted((min(r), max(r)) for r in ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
        else:
            merged.append((low, high))
    return tuple(merged)


def collapse(networks: Iterable[IPNetwork]) -> tuple[IPNetwork, ...]:
    """IPv4 then IPv6 networks, each family's contained and adjacent ones joined."""
    items = list(networks)
    v4 = [n for n in items if isinstance(n, ipaddress.IPv4Network)]
    v6 = [n for n in items if isinstance(n, ipaddress.IPv6Network)]
    return (*ipaddress.collapse_addresses(v4), *ipaddress.collapse_addresses(v6))


def ruleset(firewall: FirewallPlan) -> str:
    """The `nft -f` text that makes llmgw's table what `firewall` says: the table
    recreated whole when enabled, gone when not."""
    # Declaring before deleting makes the delete succeed when the table is absent.
    lines = [f"table {FAMILY} {TABLE}", f"delete table {FAMILY} {TABLE}"]
    if not firewall.enabled:
        return "\n".join(lines) + "\n"
    ports = ", ".join(_port_range(low, high) for low, high in firewall.port_ranges)
    v4 = [str(n) for n in firewall.allowed if n.version == 4]
    v6 = [str(n) for n in firewall.allowed if n.version == 6]
    lines += [
        f"table {FAMILY} {TABLE} {{",
        *_set(PORTS_SET, "inet_service", [ports] if ports else []),
        *_set(ALLOWED_V4, "ipv4_addr", [", ".join(v4)] if v4 else []),
        *_set(ALLOWED_V6, "ipv6_addr", [", ".join(v6)] if v6 else []),
        f"\tchain {CHAIN} {{",
        "\t\ttype filter hook input priority filter; policy accept;",
        '\t\tiif "lo" accept',
        "\t\tct state established,related accept",
        f"\t\tmeta l4proto {{ tcp, udp }} th dport @{PORTS_SET} ip saddr @{ALLOWED_V4} accept",
        f"\t\tmeta l4proto {{ tcp, udp }} th dport @{PORTS_SET} ip6 saddr @{ALLOWED_V6} accept",
        f"\t\tmeta l4proto {{ tcp, udp }} th dport @{PORTS_SET} counter drop",
        "\t}",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _port_range(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


def _set(name: str, kind: str, elements: list[str]) -> list[str]:
    body = [f"\tset {name} {{", f"\t\ttype {kind}", "\t\tflags interval"]
    if elements:
        body.append(f"\t\telements = {{ {elements[0]} }}")
    return [*body, "\t}"]

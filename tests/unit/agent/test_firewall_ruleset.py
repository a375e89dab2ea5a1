"""The firewall's pure parts: the plan from settings and addresses, the nft text it
becomes, the `firewall` message a control plane sends each node, the agent's own
networks read from `ip -j addr`, and the state file a control plane writes."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from llmgw.agent.firewall import collapse, merge_ranges, plan, ruleset
from llmgw.agent.nft import Nft
from llmgw.agent.node_firewall import NodeFirewall, networks_of_interfaces
from llmgw.control.runtime.firewall_state import state_path, write_state
from llmgw.control.runtime.hub import firewall_message
from llmgw.protocol.messages import Firewall, NodeSettings


def test_enabled_text_replaces_the_table_whole_with_sets_and_a_final_drop() -> None:
    text = ruleset(
        plan(
            enabled=True,
            port_range=(20000, 20999),
            ports=(7443,),
            networks=("10.0.0.5", "10.0.0.0/24", "fd00::/8"),
        )
    )
    lines = text.splitlines()
    # Declared, deleted, then made again: one transaction whether or not it existed.
    assert lines[:3] == ["table inet llmgw", "delete table inet llmgw", "table inet llmgw {"]
    assert "\t\telements = { 7443, 20000-20999 }" in lines
    # 10.0.0.5 is inside 10.0.0.0/24: one element, as an interval set needs.
    assert "\t\telements = { 10.0.0.0/24 }" in lines
    assert "\t\telements = { fd00::/8 }" in lines
    rules = [line.strip() for line in lines if line.startswith("\t\t") and "dport" in line]
    assert rules[-1] == "meta l4proto { tcp, udp } th dport @guarded_ports counter drop"
    assert lines.index('\t\tiif "lo" accept') < lines.index("\t\t" + rules[0])
    assert text.endswith("}\n")
    # The only table named is llmgw's.
    assert {line.split()[2] for line in lines if line.startswith("table")} == {"llmgw"}


def test_no_networks_leaves_the_sets_empty_and_loopback_only() -> None:
    text = ruleset(plan(enabled=True, port_range=(20000, 20999)))
    assert text.count("elements") == 1  # the ports alone
    assert "ip saddr @allowed_v4 accept" in text


def test_disabled_text_only_deletes_the_table() -> None:
    assert ruleset(plan(enabled=False, port_range=(1, 2), networks=("10.0.0.1",))) == (
        "table inet llmgw\ndelete table inet llmgw\n"
    )


def test_the_same_settings_give_the_same_text() -> None:
    one = plan(enabled=True, port_range=(20000, 20999), networks=("10.1.0.0/16", "10.0.0.1"))
    two = plan(enabled=True, port_range=(20000, 20999), networks=("10.0.0.1", "10.1.0.0/16"))
    assert ruleset(one) == ruleset(two)


def test_ranges_merge_where_they_overlap_or_touch() -> None:
    assert merge_ranges([(20000, 20999), (21000, 21000), (7443, 7443), (20500, 20600), (10, 5)]) == (
        (5, 10),
        (7443, 7443),
        (20000, 21000),
    )


def test_networks_collapse_per_family() -> None:
    nets = [ipaddress.ip_network(t) for t in ("10.0.0.1/32", "10.0.0.0/31", "::1/128", "10.0.0.2/31")]
    assert [str(n) for n in collapse(nets)] == ["10.0.0.0/30", "::1/128"]


def test_a_bad_network_is_named() -> None:
    with pytest.raises(ValueError, match=r"'10\.0\.0\.300' is neither an IP address nor a CIDR prefix"):
        plan(enabled=True, port_range=(1, 2), networks=("10.0.0.300",))


def test_the_message_opens_to_the_control_plane_and_the_listed_networks() -> None:
    settings = NodeSettings(firewall=True, firewall_networks=("10.9.0.0/16",), port_range=(30000, 30010))
    assert firewall_message(settings, "192.168.1.4") == Firewall(
        enabled=True, networks=("192.168.1.4", "10.9.0.0/16"), port_range=(30000, 30010)
    )
    # Loopback and a dual-stack listener's mapped address.
    assert firewall_message(settings, "127.0.0.1").networks == ("10.9.0.0/16",)
    assert firewall_message(settings, "::ffff:10.2.3.4").networks == ("10.2.3.4", "10.9.0.0/16")
    assert firewall_message(NodeSettings(firewall=False)).enabled is False
    assert firewall_message(settings, "not-an-address").networks == ("10.9.0.0/16",)


def test_the_agent_adds_its_control_planes_and_applies_only_changes(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    fake = tmp_path / "nft"
    # A stand-in nft that only counts its calls: what nft does is tested against the real one.
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\ncat > /dev/null\n')
    fake.chmod(0o755)
    node = NodeFirewall(Nft((str(fake),)), control_addresses=("10.0.0.7",))
    message = Firewall(networks=("10.9.0.0/16",))
    assert [str(n) for n in node.plan_for(message).allowed] == ["10.0.0.7/32", "10.9.0.0/16"]
    assert node.apply(message) is True
    assert node.apply(message) is False
    assert node.apply(Firewall(enabled=False)) is True
    assert calls.read_text().splitlines() == ["-f -", "-f -"]


def test_own_networks_are_the_global_ones_of_ip_addr() -> None:
    text = json.dumps(
        [
            {"ifname": "lo", "addr_info": [{"local": "127.0.0.1", "prefixlen": 8, "scope": "host"}]},
            {
                "ifname": "eth0",
                "addr_info": [
                    {"local": "10.20.3.4", "prefixlen": 16, "scope": "global"},
                    {"local": "fe80::1", "prefixlen": 64, "scope": "link"},
                    {"local": "2001:db8::5", "prefixlen": 64, "scope": "global"},
                ],
            },
            {"ifname": "eth1", "addr_info": [{"local": "10.20.9.9", "prefixlen": 16, "scope": "global"}]},
        ]
    )
    assert networks_of_interfaces(text) == ("10.20.0.0/16", "2001:db8::/64")
    assert networks_of_interfaces("not json") == ()


def test_the_state_file_is_the_message_and_needs_its_directory(tmp_path: Path) -> None:
    message = Firewall(enabled=True, networks=("10.1.0.0/16",), port_range=(20000, 20100))
    path = tmp_path / "firewall.json"
    assert write_state(path, message) is True
    assert Firewall.model_validate_json(path.read_text()) == message
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert write_state(tmp_path / "absent" / "firewall.json", message) is False
    assert not (tmp_path / "absent").exists()
    assert state_path({"LLMGW_FIREWALL_STATE": str(path)}) == path
    assert state_path({}) == Path("/var/lib/llmgw/firewall.json")

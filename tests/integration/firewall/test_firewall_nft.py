"""llmgw's nft table applied for real, inside a network namespace of the test's own:
installed with the rules the plan says, re-applied without change, removed when off,
and the host's other tables left exactly as they were. Also `llmgw firewall sync`
(from the control plane's state file, and from a configuration) as a command."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmgw.agent.firewall import plan
from llmgw.agent.nft import Nft
from llmgw.protocol.messages import Firewall, encode
from support.netns import Namespace, network_namespace

FOREIGN = """\
table inet host_rules {
\tchain input {
\t\ttype filter hook input priority filter; policy accept;
\t\ttcp dport 22 accept
\t}
}
"""


@pytest.fixture
def ns(tmp_path: Path) -> Iterator[Namespace]:
    with network_namespace(tmp_path) as namespace:
        yield namespace


def _with_foreign(ns: Namespace) -> str:
    """Adds a table of the host's own; its listing, to compare later."""
    done = ns.nft("-f", "-", stdin=FOREIGN)
    assert done.returncode == 0, done.stderr
    listed = ns.nft("list", "table", "inet", "host_rules")
    assert listed.returncode == 0, listed.stderr
    return listed.stdout


def _objects(ns: Namespace) -> list[dict[str, Any]]:
    done = ns.nft("-j", "list", "table", "inet", "llmgw")
    assert done.returncode == 0, done.stderr
    items: list[dict[str, Any]] = json.loads(done.stdout)["nftables"]
    return items


def _set_elements(ns: Namespace, name: str) -> list[Any]:
    for item in _objects(ns):
        if "set" in item and item["set"]["name"] == name:
            elements: list[Any] = item["set"].get("elem", [])
            return elements
    raise AssertionError(f"no set {name} in llmgw's table")


def test_apply_installs_the_table_with_the_guarded_ports_and_allowed_sources(ns: Namespace) -> None:
    foreign = _with_foreign(ns)
    nft = Nft([*ns.enter, "nft"])
    nft.apply(
        plan(enabled=True, port_range=(20000, 20999), ports=(7443,), networks=("10.0.0.0/24", "fd00::/8"))
    )
    assert sorted(ns.tables()) == ["inet host_rules", "inet llmgw"]
    assert _set_elements(ns, "guarded_ports") == [7443, {"range": [20000, 20999]}]
    assert _set_elements(ns, "allowed_v4") == [{"prefix": {"addr": "10.0.0.0", "len": 24}}]
    assert _set_elements(ns, "allowed_v6") == [{"prefix": {"addr": "fd00::", "len": 8}}]
    rules = [item["rule"] for item in _objects(ns) if "rule" in item]
    verdicts = [next(k for k in r["expr"][-1]) for r in rules]
    # Loopback, established, the two allowed families; the last drops everyone else.
    assert verdicts == ["accept", "accept", "accept", "accept", "drop"]
    chain = next(item["chain"] for item in _objects(ns) if "chain" in item)
    assert (chain["hook"], chain["policy"]) == ("input", "accept")
    # What nft reads back is llmgw's table as Nft lists it.
    listed = nft.table()
    assert listed is not None
    assert any("chain" in item for item in listed)
    assert ns.nft("list", "table", "inet", "host_rules").stdout == foreign


def test_applying_again_changes_nothing_and_keeps_one_table(ns: Namespace) -> None:
    nft = Nft([*ns.enter, "nft"])
    wanted = plan(enabled=True, port_range=(21000, 21099), networks=("192.168.7.0/24",))
    nft.apply(wanted)
    first = ns.ruleset()
    nft.apply(wanted)
    assert ns.ruleset() == first
    assert ns.tables() == ["inet llmgw"]


def test_a_changed_plan_replaces_the_table_whole(ns: Namespace) -> None:
    nft = Nft([*ns.enter, "nft"])
    nft.apply(plan(enabled=True, port_range=(20000, 20999), networks=("10.1.0.0/16",)))
    nft.apply(plan(enabled=True, port_range=(30000, 30010), networks=("10.2.0.5",)))
    assert _set_elements(ns, "guarded_ports") == [{"range": [30000, 30010]}]
    assert _set_elements(ns, "allowed_v4") == ["10.2.0.5"]


def test_disabled_removes_only_llmgws_table(ns: Namespace) -> None:
    foreign = _with_foreign(ns)
    nft = Nft([*ns.enter, "nft"])
    nft.apply(plan(enabled=True, port_range=(20000, 20999)))
    nft.apply(plan(enabled=False, port_range=(20000, 20999)))
    assert ns.tables() == ["inet host_rules"]
    assert nft.table() is None
    assert ns.nft("list", "table", "inet", "host_rules").stdout == foreign
    # Off again, with no table to remove: still fine.
    nft.apply(plan(enabled=False, port_range=(20000, 20999)))
    nft.remove()
    assert ns.tables() == ["inet host_rules"]


def _sync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmgw", "firewall", "sync", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_sync_applies_the_state_file_then_its_change_to_off(ns: Namespace, tmp_path: Path) -> None:
    foreign = _with_foreign(ns)
    state = tmp_path / "firewall.json"
    state.write_text(encode(Firewall(enabled=True, networks=("10.4.0.0/16",), port_range=(20000, 20100))))
    done = _sync("--state", str(state), "--nft", str(ns.nft_program))
    assert done.returncode == 0, done.stderr
    assert "guards ports 20000-20100; open to 10.4.0.0/16" in done.stdout
    assert _set_elements(ns, "allowed_v4") == [{"prefix": {"addr": "10.4.0.0", "len": 16}}]
    state.write_text(encode(Firewall(enabled=False)))
    done = _sync("--state", str(state), "--nft", str(ns.nft_program))
    assert done.returncode == 0, done.stderr
    assert "off; table inet llmgw removed" in done.stdout
    assert ns.tables() == ["inet host_rules"]
    assert ns.nft("list", "table", "inet", "host_rules").stdout == foreign


def test_sync_from_a_configuration_file(ns: Namespace, tmp_path: Path) -> None:
    config = tmp_path / "llmgw.yaml"
    config.write_text(
        "firewall_networks: [10.8.0.0/16, 192.168.1.7]\ncontrol: {port_range: [25000, 25999]}\n"
    )
    done = _sync("--config", str(config), "--nft", str(ns.nft_program))
    assert done.returncode == 0, done.stderr
    assert _set_elements(ns, "guarded_ports") == [{"range": [25000, 25999]}]
    assert _set_elements(ns, "allowed_v4") == [{"prefix": {"addr": "10.8.0.0", "len": 16}}, "192.168.1.7"]


def test_sync_without_a_state_file_says_where_it_looked(tmp_path: Path) -> None:
    missing = tmp_path / "none.json"
    done = _sync("--state", str(missing), "--nft", "/nonexistent/nft")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"llmgw firewall sync: --state {missing} does not exist: start the control plane on this"
        " machine, or give --config"
    )


def test_sync_names_a_missing_nft(tmp_path: Path) -> None:
    state = tmp_path / "firewall.json"
    state.write_text(encode(Firewall()))
    done = _sync("--state", str(state), "--nft", "/nonexistent/nft")
    assert done.returncode == 2
    assert "/nonexistent/nft is not installed" in done.stderr
    assert "Traceback" not in done.stderr


def test_install_writes_the_units_and_syncs_now(ns: Namespace, tmp_path: Path) -> None:
    units = tmp_path / "units"
    units.mkdir()
    state = tmp_path / "firewall.json"
    # Before the control plane has written anything: units, and nothing applied yet.
    done = _sync("--install", "--units-dir", str(units), "--state", str(state), "--nft", str(ns.nft_program))
    assert done.returncode == 0, done.stderr
    assert f"no state at {state} yet" in done.stdout
    assert "enable it with: systemctl enable --now llmgw-firewall-sync.path" in done.stdout
    assert ns.tables() == []
    path_unit = (units / "llmgw-firewall-sync.path").read_text()
    assert f"PathChanged={state}\n" in path_unit
    service = (units / "llmgw-firewall-sync.service").read_text()
    exec_start = next(line for line in service.splitlines() if line.startswith("ExecStart="))
    assert exec_start.endswith(f"firewall sync --state {state}")
    state.write_text(encode(Firewall(port_range=(20000, 20010))))
    done = _sync("--install", "--units-dir", str(units), "--state", str(state), "--nft", str(ns.nft_program))
    assert done.returncode == 0, done.stderr
    assert _set_elements(ns, "guarded_ports") == [{"range": [20000, 20010]}]

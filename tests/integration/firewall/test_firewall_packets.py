"""llmgw's table stops real packets: two network namespaces joined by a veth pair, a
node (10.99.0.1) with the table and listeners on a guarded and an unguarded port, and a
client with an allowed (10.99.0.2) and another (10.99.0.3) address. The allowed source
connects; the other's SYNs are dropped (the drop rule's counter shows them) while the
unguarded port still answers it; with the firewall off it connects too."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from llmgw.agent.firewall import plan
from llmgw.agent.nft import Nft
from support.netns import Namespace, network_namespace

GUARDED, OPEN = 20005, 8080
LISTEN = f"""
import selectors, socket
sel = selectors.DefaultSelector()
for port in ({GUARDED}, {OPEN}):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(16); sel.register(s, selectors.EVENT_READ)
print("listening", flush=True)
while True:
    for key, _ in sel.select(timeout=600):
        conn, _ = key.fileobj.accept(); conn.close()
"""
CONNECT = """
import socket, sys
s = socket.socket(); s.settimeout(1.5); s.bind((sys.argv[1], 0))
try:
    s.connect(("10.99.0.1", int(sys.argv[2]))); print("connected")
except TimeoutError:
    print("no answer")
"""


@dataclass
class Pair:
    node: Namespace
    client: Namespace

    def connect(self, source: str, port: int) -> str:
        done = subprocess.run(
            [*self.client.enter, "python3", "-c", CONNECT, source, str(port)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def dropped(self) -> int:
        done = self.node.nft("-j", "list", "chain", "inet", "llmgw", "input")
        assert done.returncode == 0, done.stderr
        rules = [item["rule"] for item in json.loads(done.stdout)["nftables"] if "rule" in item]
        counter = next(e["counter"] for e in rules[-1]["expr"] if "counter" in e)
        packets: int = counter["packets"]
        return packets


def _ip(ns: Namespace, *args: str) -> None:
    done = subprocess.run([*ns.enter, "ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        pytest.skip(f"ip {' '.join(args)} is refused here: {done.stderr.strip()}")


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    (tmp_path / "node").mkdir()
    (tmp_path / "client").mkdir()
    with (
        network_namespace(tmp_path / "node") as node,
        network_namespace(tmp_path / "client") as client,
        contextlib.ExitStack() as stack,
    ):
        _ip(
            node,
            "link",
            "add",
            "llmgw-a",
            "type",
            "veth",
            "peer",
            "name",
            "llmgw-b",
            "netns",
            str(client.pid),
        )
        _ip(node, "addr", "add", "10.99.0.1/24", "dev", "llmgw-a")
        _ip(node, "link", "set", "llmgw-a", "up")
        _ip(node, "link", "set", "lo", "up")
        _ip(client, "addr", "add", "10.99.0.2/24", "dev", "llmgw-b")
        _ip(client, "addr", "add", "10.99.0.3/24", "dev", "llmgw-b")
        _ip(client, "link", "set", "llmgw-b", "up")
        listener = subprocess.Popen([*node.enter, "python3", "-c", LISTEN], stdout=subprocess.PIPE, text=True)
        stack.callback(listener.wait, 10)
        stack.callback(listener.kill)
        assert listener.stdout is not None
        stack.callback(listener.stdout.close)
        assert listener.stdout.readline().strip() == "listening"
        yield Pair(node, client)


def test_only_allowed_sources_reach_the_guarded_port(pair: Pair) -> None:
    nft = Nft((str(pair.node.nft_program),))
    # Before any table: both sources reach the port (the set-up itself works).
    assert pair.connect("10.99.0.3", GUARDED) == "connected"
    nft.apply(plan(enabled=True, port_range=(20000, 20999), networks=("10.99.0.2",)))
    assert pair.connect("10.99.0.2", GUARDED) == "connected"
    assert pair.dropped() == 0
    assert pair.connect("10.99.0.3", GUARDED) == "no answer"
    assert pair.dropped() >= 1
    assert pair.connect("10.99.0.3", OPEN) == "connected"
    nft.apply(plan(enabled=False, port_range=(20000, 20999)))
    assert pair.connect("10.99.0.3", GUARDED) == "connected"

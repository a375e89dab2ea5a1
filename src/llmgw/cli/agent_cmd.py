"""`llmgw agent`: run the node agent, connected to the control plane at --server (one
host:port, or several comma-separated: servers sharing a store, of which the agent
follows the one holding the leader lease).

The agent registers this machine (its cards, cores, memory, disk, labels, engines,
weights), starts and stops engine replicas on the control plane's orders, and reports
their states. Stopping the agent (SIGTERM, Ctrl-C) leaves the engines running: the
next agent started on the same --state-dir adopts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import socket
import ssl
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from llmgw.cli.startup import LOG_FORMAT_HELP, LOG_LEVEL_HELP, cannot_start, configure_logging, refuse_config
from llmgw.errors import AgentError, ConfigError

if TYPE_CHECKING:
    from llmgw.agent.node import NodeConfig

# The agent's own modules (aiohttp, the supervisor, discovery) are imported by the
# functions that run it, not here: every `llmgw` command loads this module to learn
# `agent`'s options, and the operator's commands should not wait for the agent's.

LOCK_NAME = "agent.lock"
SYSTEM_STATE_DIR = Path("/var/lib/llmgw/agent")


def manages_firewall(choice: bool | None, state_dir: Path) -> bool:
    """Whether the agent keeps llmgw's nft table: as asked (`--firewall`,
    `--no-firewall`), else when it runs as the node's service (root, the system state
    directory). An agent started by hand elsewhere leaves the host's firewall alone."""
    if choice is not None:
        return choice
    return os.geteuid() == 0 and state_dir == SYSTEM_STATE_DIR


def default_state_dir() -> Path:
    """/var/lib/llmgw/agent for root (as under systemd), else the user's state directory."""
    if os.geteuid() == 0:
        return SYSTEM_STATE_DIR
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "llmgw" / "agent"


def parse_labels(text: str) -> dict[str, str]:
    """`k=v,k2=v2` as a mapping; ConfigError naming a pair without '='."""
    out: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError([f"--labels {item!r}: write key=value pairs separated by commas"])
        out[key.strip()] = value.strip()
    from llmgw.agent.discovery import check_labels  # noqa: PLC0415 (see the imports)

    return check_labels(out)


@contextlib.contextmanager
def state_lock(state_dir: Path) -> Iterator[None]:
    """Holds the state directory for this agent alone: two agents adopting the same
    replicas would each try to stop what the other reports."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with (state_dir / LOCK_NAME).open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise AgentError(
                f"--state-dir {state_dir} is in use by agent pid {holder}: stop it first"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield


async def run_agent(
    config: NodeConfig,
    server: str,
    *,
    labels: dict[str, str],
    ssl_context: ssl.SSLContext | None,
    server_hostname: str,
    nft: tuple[str, ...] | None = None,
) -> None:
    """Runs the agent until SIGTERM or SIGINT; with `nft` (the command), it keeps llmgw's
    firewall table as the control plane says."""
    import aiohttp  # noqa: PLC0415 (see the imports)

    from llmgw.agent.client import AgentLink  # noqa: PLC0415
    from llmgw.agent.discovery import default_probes, discover  # noqa: PLC0415
    from llmgw.agent.nft import Nft  # noqa: PLC0415
    from llmgw.agent.node import Node  # noqa: PLC0415
    from llmgw.agent.node_firewall import NodeFirewall, own_networks, server_addresses  # noqa: PLC0415

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # Weights from an https mirror are checked against the cluster CA as well.
    connector = aiohttp.TCPConnector(ssl=ssl_context if ssl_context is not None else True)
    log = logging.getLogger("llmgw.agent")
    log.info("agent %s: state in %s; taking inventory", config.node_id, config.state_dir)
    async with aiohttp.ClientSession(connector=connector) as session:
        probes = default_probes(llama_server=config.binaries.get("llamacpp", "llama-server"))
        find = partial(discover, weights_dir=str(config.weights_dir), labels=labels, probes=probes)
        firewall = None
        if nft is not None:
            hosts = [item.strip().rpartition(":")[0] for item in server.split(",") if item.strip()]
            allowed = await asyncio.to_thread(server_addresses, hosts) + await asyncio.to_thread(own_networks)
            firewall = NodeFirewall(Nft(nft), allowed)
        node = Node(config, session, discover=find, firewall=firewall)
        await node.start()
        log.info(
            "agent %s: %d replica(s) adopted; dialling %s",
            config.node_id,
            len(node.supervisor.replicas),
            server,
        )
        link = AgentLink(node, session, server, ssl_context=ssl_context, server_hostname=server_hostname)
        try:
            await link.run(stop)
        finally:
            running = sum(1 for r in node.supervisor.replicas.values() if not r.status.ended)
            log.info(
                "agent %s: stopping; %d engine(s) left running for the next agent", config.node_id, running
            )
            await node.close()


def agent(
    server: str = typer.Option(
        ...,
        "--server",
        help="The control plane's agent port, host:port; servers sharing a store: host:port,host:port.",
    ),
    labels: str = typer.Option("", "--labels", help="Node labels, k=v,k2=v2 (e.g. llmgw.io/rack=r12)."),
    state_dir: Path | None = typer.Option(
        None,
        "--state-dir",
        help="Replica records and logs. Default: /var/lib/llmgw/agent for root.",
        show_default=False,
    ),
    weights_dir: Path | None = typer.Option(
        None,
        "--weights-dir",
        help="Where fetched weights go. Default: <state-dir>/weights.",
        show_default=False,
    ),
    node_id: str = typer.Option("", "--node-id", help="This node's name. Default: the host name."),
    tls_cert: str = typer.Option(
        "", "--tls-cert", help="This node's certificate (PEM), from the cluster CA."
    ),
    tls_key: str = typer.Option("", "--tls-key", help="Its private key (PEM)."),
    tls_ca: str = typer.Option(
        "", "--tls-ca", help="The cluster CA the control plane's certificate is from."
    ),
    tls_server_name: str = typer.Option(
        "",
        "--tls-server-name",
        help="The name the control plane's certificate carries, if not --server's host.",
    ),
    insecure: bool = typer.Option(
        False, "--insecure", help="Plaintext, unauthenticated: only with a control plane on agent_insecure."
    ),
    engine_host: str = typer.Option("127.0.0.1", "--engine-host", help="The address engines bind."),
    advertise: str = typer.Option(
        "", "--advertise", help="The address the gateway reaches engines at. Default: --engine-host."
    ),
    engine_bin: list[str] = typer.Option(
        [], "--engine-bin", help="ENGINE=PATH: the program for an engine, e.g. llamacpp=/opt/llama-server."
    ),
    mirror: str = typer.Option("", "--mirror", help="The model mirror's file URL, over the cluster's own."),
    firewall: bool | None = typer.Option(
        None,
        "--firewall/--no-firewall",
        help="Keep llmgw's nft table as the control plane says (firewall.enabled)."
        " Default: on for root with the system --state-dir.",
        show_default=False,
    ),
    nft: str = typer.Option("nft", "--nft", help="The nft program the firewall is applied with."),
    log_level: str = typer.Option("info", "--log-level", help=LOG_LEVEL_HELP),
    log_format: str = typer.Option("text", "--log-format", help=LOG_FORMAT_HELP),
) -> None:
    """Run the node agent: register this machine and run engine replicas for the control plane."""
    from llmgw.agent.binaries import engine_binaries, parse_engine_bins  # noqa: PLC0415 (see the imports)
    from llmgw.agent.client import agent_urls  # noqa: PLC0415
    from llmgw.agent.node import NodeConfig  # noqa: PLC0415
    from llmgw.protocol.tls import client_context  # noqa: PLC0415

    configure_logging(log_level, log_format)
    try:
        if insecure and (tls_cert or tls_key or tls_ca):
            raise AgentError("--insecure and --tls-* exclude each other: choose one")
        context = None if insecure else client_context(cert_file=tls_cert, key_file=tls_key, ca_file=tls_ca)
        agent_urls(server, context is not None)  # refuses a malformed --server before anything starts
        root = (state_dir or default_state_dir()).absolute()
        config = NodeConfig(
            node_id=node_id or socket.gethostname(),
            state_dir=root,
            weights_dir=(weights_dir or root / "weights").absolute(),
            engine_host=engine_host,
            advertise_host=advertise,
            binaries=engine_binaries(parse_engine_bins(engine_bin)),
            mirror_url=mirror,
        )
        checked = parse_labels(labels)
        with state_lock(root):
            asyncio.run(
                run_agent(
                    config,
                    server,
                    labels=checked,
                    ssl_context=context,
                    server_hostname=tls_server_name,
                    nft=(nft,) if manages_firewall(firewall, root) else None,
                )
            )
    except ConfigError as exc:
        raise refuse_config(exc) from None
    except AgentError as exc:
        typer.echo(f"llmgw agent: {exc}", err=True)
        raise typer.Exit(code=2) from None
    except OSError as exc:
        raise cannot_start("agent", exc) from None

"""TLS for the agent port: both ends prove who they are with certificates from the
cluster's CA (mutual TLS), or, only where the operator says `agent_insecure`, nothing
at all and then on loopback unless an address is named.

The control plane's side (`server_context`, `agent_listener`) is here next to the
agent's (`client_context`) so that the two cannot drift apart; the control plane
imports it. A node proves its name by its certificate: `peer_names` gives the names
the certificate carries, which the control plane compares with `register.node_id`.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmgw.config.tls import TLS
from llmgw.config.values import split_host_port
from llmgw.errors import AgentError, ConfigError

_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def _read(context: ssl.SSLContext, *, cert: str, key: str, ca: str, side: str) -> None:
    for label, path in (("certificate", cert), ("key", key), ("CA bundle", ca)):
        if path and not Path(path).is_file():
            raise AgentError(f"{side}: the {label} {path} does not exist: give the path of a PEM file")
    try:
        if cert:
            context.load_cert_chain(cert, key or None)
        if ca:
            context.load_verify_locations(cafile=ca)
    except ssl.SSLError as exc:
        raise AgentError(f"{side}: {cert or ca} cannot be used: {exc.reason or exc}") from exc


def server_context(tls: TLS) -> ssl.SSLContext:
    """The control plane's context on the agent port: its own certificate, and every
    agent must show one signed by `tls.ca_file`."""
    if not (tls.cert_file and tls.ca_file):
        raise AgentError(
            "agent_tls: the agent port needs cert_file, key_file and ca_file (the CA agents' certificates"
            " are signed by); or agent_insecure: true on a trusted network"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _VERSIONS[tls.min_version]
    context.verify_mode = ssl.CERT_REQUIRED
    _read(context, cert=tls.cert_file, key=tls.key_file, ca=tls.ca_file, side="agent_tls")
    return context


def client_context(
    *, cert_file: str, key_file: str, ca_file: str, min_version: str = "1.2"
) -> ssl.SSLContext:
    """The agent's context: its certificate, and the control plane's must be signed by
    `ca_file` and name the host dialled."""
    if not (cert_file and key_file and ca_file):
        raise AgentError(
            "the agent needs --tls-cert, --tls-key and --tls-ca (the cluster CA) to reach the control plane;"
            " or --insecure where the control plane runs with agent_insecure"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = _VERSIONS[min_version]
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    _read(context, cert=cert_file, key=key_file, ca=ca_file, side="agent")
    return context


def peer_names(peercert: dict[str, Any] | None) -> set[str]:
    """The names in a verified peer certificate (`SSLObject.getpeercert()`): its common
    name and its DNS subject alternative names."""
    if not peercert:
        return set()
    names: set[str] = set()
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                names.add(str(value))
    for kind, value in peercert.get("subjectAltName", ()):
        if kind == "DNS":
            names.add(str(value))
    return names


@dataclass(frozen=True)
class AgentListener:
    """Where and how the control plane listens for agents."""

    host: str
    port: int
    ssl: ssl.SSLContext | None


def agent_listener(agent_listen: str, tls: TLS, insecure: bool) -> AgentListener:
    """The agent port as the settings ask: TLS whenever agent_tls is configured;
    plaintext only with agent_insecure, and then on loopback unless agent_listen names
    a host. ConfigError when neither is given."""
    try:
        host, port = split_host_port(agent_listen)
    except ValueError as exc:
        raise ConfigError([f"agent_listen: {exc}"]) from exc
    named = bool(host)
    if tls.enabled:
        return AgentListener(host, port, server_context(tls))
    if not insecure:
        raise ConfigError(
            [
                "agent_tls: the agent port has no certificates: give agent_tls.cert_file, key_file and"
                " ca_file, or set agent_insecure: true for a single machine or a trusted network"
            ]
        )
    return AgentListener(host if named else "127.0.0.1", port, None)

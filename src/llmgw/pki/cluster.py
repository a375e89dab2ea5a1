"""The files of a cluster's PKI and the two acts that make them: `init_cluster` (the CA
and the control plane's certificate, `llmgw server init`) and `issue_bundle` (a node's
certificate, key and the CA beside them, `llmgw node add`, written by `Bundle.write`
once the store has recorded it).

Where they live: the three files `agent_tls` names (`ca_file`, `cert_file`, `key_file`),
and the CA's key beside `ca_file` with the suffix `.key` (ca.crt, ca.key): whatever finds
the configuration finds the CA. A node's bundle is a folder holding `node.crt`, `node.key`
and `ca.crt`, the three files the agent's --tls-cert, --tls-key and --tls-ca take.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from llmgw.config.tls import TLS
from llmgw.errors import ConfigError
from llmgw.pki.authority import Issued, create_authority, issue_node, issue_server, load_authority
from llmgw.pki.files import write_private

NODE_CERT = "node.crt"
NODE_KEY = "node.key"
BUNDLE_CA = "ca.crt"


def ca_key_path(ca_file: Path) -> Path:
    """The CA's private key: beside its certificate, `.key` for the suffix."""
    return ca_file.with_suffix(".key")


@dataclass(frozen=True)
class ClusterFiles:
    """Where the CA and the control plane's certificate are kept."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path

    @classmethod
    def in_dir(cls, directory: Path) -> ClusterFiles:
        d = directory.absolute()
        return cls(d / "ca.crt", d / "ca.key", d / "server.crt", d / "server.key")

    @classmethod
    def from_tls(cls, tls: TLS, setting: str = "agent_tls") -> ClusterFiles:
        """The files a configuration's `agent_tls` names; ConfigError when it names none."""
        if not (tls.ca_file and tls.cert_file and tls.key_file):
            raise ConfigError(
                [
                    f"{setting}: cert_file, key_file and ca_file are not all set: run llmgw server init"
                    " --config FILE, which writes them"
                ]
            )
        ca = Path(tls.ca_file)
        return cls(ca, ca_key_path(ca), Path(tls.cert_file), Path(tls.key_file))

    def tls(self) -> TLS:
        return TLS(cert_file=str(self.server_cert), key_file=str(self.server_key), ca_file=str(self.ca_cert))

    def authority(self) -> Issued:
        """The CA, read; ConfigError naming the file when it is missing."""
        for path in (self.ca_cert, self.ca_key):
            if not path.is_file():
                raise ConfigError([f"the cluster CA file {path} does not exist: run llmgw server init first"])
        return load_authority(self.ca_cert.read_bytes(), self.ca_key.read_bytes())


def init_cluster(
    files: ClusterFiles, names: Sequence[str], ips: Sequence[str], now: datetime, *, force: bool
) -> tuple[Issued, Issued]:
    """Makes the CA and the control plane's certificate and writes them (0600, folders
    0700). An existing CA is refused unless `force`: replacing it makes every node
    certificate it signed worthless."""
    if not force and (files.ca_cert.exists() or files.ca_key.exists()):
        raise ConfigError(
            [
                f"a cluster CA already exists at {files.ca_cert}: keep it, or give --force to replace it"
                " (every node certificate it signed is then refused)"
            ]
        )
    authority = create_authority(names[0] if names else ips[0] if ips else "llmgw", now)
    server = issue_server(authority, names, ips, now)
    write_private(files.ca_key, authority.key_pem)
    write_private(files.ca_cert, authority.cert_pem)
    write_private(files.server_key, server.key_pem)
    write_private(files.server_cert, server.cert_pem)
    return authority, server


@dataclass(frozen=True)
class Bundle:
    """A node's certificate and key, and the CA's certificate, not yet written."""

    out: Path
    issued: Issued
    ca_pem: bytes

    def write(self) -> None:
        """Writes node.key, node.crt and ca.crt into `out` (0600, the folder 0700)."""
        write_private(self.out / NODE_KEY, self.issued.key_pem)
        write_private(self.out / NODE_CERT, self.issued.cert_pem)
        write_private(self.out / BUNDLE_CA, self.ca_pem)


def issue_bundle(
    files: ClusterFiles, name: str, ips: Sequence[str], out: Path, now: datetime, *, force: bool
) -> Bundle:
    """Signs a certificate for node `name`, to be written into `out` once it is recorded
    (a bundle on disk that the store does not know could never be revoked)."""
    cert_path = out / NODE_CERT
    if cert_path.exists() and not force:
        raise ConfigError(
            [
                f"{cert_path} already exists: give another --out, or --force to replace it"
                " with a new certificate"
            ]
        )
    authority = files.authority()
    return Bundle(out, issue_node(authority, name, ips, now), authority.cert_pem)

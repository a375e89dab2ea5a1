"""Listen addresses as the settings write them: `:8080`, `127.0.0.1:9090`, `[::1]:8080`."""

from __future__ import annotations

from llmgw.errors import ConfigError


def split_listen(address: str, field: str) -> tuple[str, int]:
    """Host and port of a listen address; an empty host is every interface."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError([f"{field}: {address!r} is not host:port, like :8080 or 127.0.0.1:9090"])
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)

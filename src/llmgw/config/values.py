"""Value types several settings share: listen addresses, URLs, networks, bounded numbers
and durations.

Each refuses a bad value with a sentence naming the value and what to write instead;
the loader puts the field's full path in front of it. Keeping them here means
`router.trusted_proxies` and `firewall_networks` cannot drift apart on what a network
is, and every byte count refuses a negative number the same way.
"""

from __future__ import annotations

import ipaddress
import math
import re
from datetime import timedelta
from typing import Annotated, TypeVar
from urllib.parse import urlsplit

from pydantic import AfterValidator

from llmgw.core.durations import Duration, format_duration

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_N = TypeVar("_N", int, float)


MAX_NUMBER = 2**53
"""The largest number any setting takes: beyond it a float loses whole units, SQLite
cannot store it, and no count, size or price of a real deployment is that large."""


def _bounded(value: _N) -> _N:
    if not math.isfinite(value) or abs(value) > MAX_NUMBER:
        raise ValueError(f"{value} is out of range: give a number under {MAX_NUMBER:.0e}")
    return value


def _not_negative_number(value: _N) -> _N:
    if value < 0:
        raise ValueError(f"{value} is negative: give 0 or more")
    return _bounded(value)


def _positive_number(value: _N) -> _N:
    if value <= 0:
        raise ValueError(f"{value} must be above zero")
    return _bounded(value)


def _share(value: float) -> float:
    if not 0 <= value <= 1:
        raise ValueError(f"{value} is a share: give a number from 0 to 1, like 0.85")
    return value


def _not_negative_duration(value: timedelta) -> timedelta:
    if value < timedelta(0):
        raise ValueError(f"{format_duration(value)} is negative: give 0s or more")
    return value


def _positive_duration(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError(f"{format_duration(value)} must be above zero, like 5s")
    return value


NonNegativeInt = Annotated[int, AfterValidator(_not_negative_number)]
PositiveInt = Annotated[int, AfterValidator(_positive_number)]
NonNegativeFloat = Annotated[float, AfterValidator(_not_negative_number)]
PositiveFloat = Annotated[float, AfterValidator(_positive_number)]
Share = Annotated[float, AfterValidator(_share)]
"""A fraction from 0 to 1 inclusive."""
NonNegativeDuration = Annotated[Duration, AfterValidator(_not_negative_duration)]
PositiveDuration = Annotated[Duration, AfterValidator(_positive_duration)]


def split_host_port(text: str) -> tuple[str, int]:
    """`127.0.0.1:9090` as (`127.0.0.1`, 9090); an empty host means every interface."""
    host, sep, port = text.rpartition(":")
    if not sep:
        raise ValueError(f"{text!r} has no port: write host:port, like :8080 or 127.0.0.1:9090")
    if host.startswith("["):
        if not host.endswith("]"):
            raise ValueError(f"{text!r}: close the IPv6 address's bracket, like [::1]:9090")
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{text!r}: write an IPv6 address in brackets, like [::1]:9090")
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{text!r}: the port {port!r} is not a number from 0 to 65535")
    return host, int(port)


def is_loopback_host(host: str) -> bool:
    """Whether a listener on `host` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _listen_address(text: str) -> str:
    if not text:
        raise ValueError("is empty: give host:port to listen on, like :8080 or 127.0.0.1:9090")
    split_host_port(text)
    return text


def _optional_listen_address(text: str) -> str:
    return text if text == "" else _listen_address(text)


ListenAddress = Annotated[str, AfterValidator(_listen_address)]
"""host:port to listen on; `:8080` is every interface."""
OptionalListenAddress = Annotated[str, AfterValidator(_optional_listen_address)]
"""host:port, or empty for a listener that is off."""


def is_http_url(text: str) -> bool:
    """Whether `text` is an absolute http:// or https:// address with a host."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _optional_http_url(text: str) -> str:
    if text and not is_http_url(text):
        raise ValueError(
            f"{text!r} is not an http:// or https:// address with a host, like https://host:8082"
        )
    return text


OptionalHttpURL = Annotated[str, AfterValidator(_optional_http_url)]
"""An http(s) address, or empty for a feature that is off."""


def parse_network(text: str) -> IPNetwork:
    """`10.0.0.0/8`, `192.168.1.7` or `fd00::/8` as a network; an address is a network of one."""
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither an IP address nor a CIDR prefix: write it like 10.0.0.5 or 10.20.0.0/16"
        ) from None


def _network(text: str) -> str:
    parse_network(text)
    return text


NetworkText = Annotated[str, AfterValidator(_network)]
"""An IP address or CIDR prefix, kept as written."""

_HEADER_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _header_name(text: str) -> str:
    if text and not _HEADER_TOKEN.match(text):
        raise ValueError(f"{text!r} is not an HTTP header name: letters, digits and '-', like x-session-id")
    return text


HeaderName = Annotated[str, AfterValidator(_header_name)]
"""An HTTP header name, or empty where the header is optional."""

"""Small blocking HTTP helpers for the sim's integration tests (JSON in, JSON out)."""

from __future__ import annotations

import urllib.request
from typing import Any

import orjson

# A fast model: 0.05 x the defaults keeps a 16-token answer well under 100 ms.
FAST = ("--time-scale", "0.05")


def get_json(url: str, timeout: float = 5.0) -> Any:
    """`GET url` parsed as JSON."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return orjson.loads(response.read())


def get_text(url: str, timeout: float = 5.0) -> str:
    """`GET url` as text."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return str(response.read().decode())


def post_json(url: str, payload: object, timeout: float = 5.0) -> Any:
    """`POST url` with a JSON body; the JSON answer (or None for an empty body)."""
    request = urllib.request.Request(
        url, data=orjson.dumps(payload), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = response.read()
        return orjson.loads(body) if body else None

"""One line of a batch's input file, checked before anything runs (pure: bytes in,
a verdict out).

A line is `{"custom_id": str, "method": "POST", "url": <the batch's endpoint>,
"body": {...}}`, as OpenAI's Batch API takes it. A line that is not is written to the
batch's error file with its `custom_id` (when one can be read) and the rest still run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

ENDPOINTS: tuple[str, ...] = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
"""The endpoints a batch may run, each line's `url`."""


@dataclass(frozen=True)
class Line:
    """A line fit to run."""

    custom_id: str
    body: dict[str, Any]


@dataclass(frozen=True)
class BadLine:
    """A line refused, and why; `custom_id` when the line had a readable one."""

    custom_id: str | None
    code: str
    message: str


def check_line(raw: bytes, endpoint: str, seen: set[str]) -> Line | BadLine | None:
    """The verdict on one line of input (None for a blank line, which is skipped);
    `seen` holds the custom ids of the lines before, and gains this one's."""
    if not raw.strip():
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return BadLine(None, "invalid_json", "the line is not JSON: each line holds one request object")
    if not isinstance(value, dict):
        return BadLine(
            None, "invalid_request", "the line is not a JSON object with custom_id, method, url and body"
        )
    custom_id = value.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return BadLine(
            None, "missing_custom_id", "custom_id is missing: give each line a unique string custom_id"
        )
    if custom_id in seen:
        return BadLine(
            custom_id,
            "duplicate_custom_id",
            f"custom_id {custom_id!r} is used by an earlier line: make each unique",
        )
    seen.add(custom_id)
    if value.get("method", "POST") != "POST":
        return BadLine(custom_id, "invalid_method", "method must be POST")
    url = value.get("url")
    if url != endpoint:
        return BadLine(
            custom_id,
            "invalid_url",
            f"url {url!r} is not this batch's endpoint {endpoint}: a batch runs one endpoint",
        )
    body = value.get("body")
    if not isinstance(body, dict):
        return BadLine(custom_id, "invalid_body", "body must be the request's JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        return BadLine(custom_id, "missing_model", "body.model is missing: name the model of each request")
    if body.get("stream"):
        return BadLine(
            custom_id, "stream_not_supported", "body.stream is not supported in a batch: leave it out"
        )
    return Line(custom_id, body)

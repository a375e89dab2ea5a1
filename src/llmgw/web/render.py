"""Rendering the pages: Jinja2 templates shipped in the package (templates/), every
value escaped, and the headers each page goes out with.

The Content-Security-Policy allows this site's own files and nothing else: no inline
script or style, no other origin, no framing. The templates keep to it (their one
script and one stylesheet are files under /static/).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from llmgw import __version__

HTML = "text/html; charset=utf-8"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "same-origin"),
    ("x-frame-options", "DENY"),
)


def page_headers() -> list[tuple[str, str]]:
    """A page's headers: its type, the security headers, and caching that keeps a page
    in one visitor's language from being served to another."""
    return [
        ("content-type", HTML),
        *SECURITY_HEADERS,
        ("cache-control", "private, no-cache"),
        ("vary", "Cookie, Accept-Language"),
    ]


class Renderer:
    """The compiled templates, built once at start."""

    def __init__(self) -> None:
        self._env = Environment(
            loader=PackageLoader("llmgw.web", "templates"),
            autoescape=select_autoescape(("html",), default=True),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )

    def render(self, template: str, context: Mapping[str, Any]) -> bytes:
        return self._env.get_template(template).render({"version": __version__, **context}).encode()
